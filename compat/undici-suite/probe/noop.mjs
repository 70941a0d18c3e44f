await new Promise(r => setTimeout(r, 5))
