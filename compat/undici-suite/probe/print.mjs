import fs from 'fs'; fs.appendFileSync('/tmp/preload-pids.txt', `import pid=${process.pid} argv=${process.argv.slice(1)}\n`)
