import dc from 'node:diagnostics_channel';
import http from 'node:http';
const srv = http.createServer(() => {}); await new Promise(r => srv.listen(0, '127.0.0.1', r));
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
let n = 0;
dc.subscribe('http.client.request.created', ({ request }) => {
  const id = ++n;
  const t = setTimeout(() => { request.destroy(Object.assign(new Error('deadline ' + id), { code: 'ERR_DEADLINE_EXCEEDED' })); }, 200 * id);
  request.once('close', () => clearTimeout(t));
});
const url = `http://127.0.0.1:${srv.address().port}/`;
const call = (i) => new Promise((res) => { const s = Date.now(); http.get(url, { agent }, (r) => res('resp')).on('error', (e) => res(`${i} err ${e.message} after ${Date.now() - s}ms`)); });
console.log(await Promise.all([call(1), call(2), call(3)]));
console.log('agent requests', Object.values(agent.requests).map(q => q.length), 'sockets', Object.values(agent.sockets).map(q => q.length), 'free', Object.values(agent.freeSockets).map(q=>q.length));
srv.close(); agent.destroy();
