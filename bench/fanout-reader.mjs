// A child process of bench/fanout.mjs holding `count` GET /events/stream readers on raw sockets
// (argv: port count). The parser is as cheap as a reader can be: each chunk is scanned for
// `event: transition` as latin1 text, with the last 16 characters carried over so that a marker
// split across two chunks counts once. It posts {opened} once every stream has its first bytes,
// {seen: k} each time every stream has k events, and on 'report' every stream's arrival times.
import net from 'node:net';
import { performance } from 'node:perf_hooks';

const [port, count] = process.argv.slice(2).map(Number);
const MARK = 'event: transition';
const OPEN_AT_ONCE = 50; // connections opened concurrently
const now = () => performance.timeOrigin + performance.now();
const arrivals = Array.from({ length: count }, () => []);
const complete = [count]; // complete[k]: streams with at least k events
const sockets = [];

function open(i) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () =>
      socket.write('GET /events/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'),
    );
    sockets.push(socket);
    let carry = '';
    let first = true;
    socket.on('error', reject);
    socket.on('data', (chunk) => {
      const at = now();
      const text = carry + chunk.toString('latin1');
      if (first) {
        first = false;
        if (!text.startsWith('HTTP/1.1 200')) return reject(new Error(`stream refused: ${text.slice(0, 80)}`));
        resolve();
      }
      const times = arrivals[i];
      for (let k = text.indexOf(MARK); k >= 0; k = text.indexOf(MARK, k + MARK.length)) {
        times.push(at);
        const n = times.length;
        complete[n] = (complete[n] ?? 0) + 1;
        if (complete[n] === count) process.send?.({ seen: n });
      }
      carry = text.slice(-16);
    });
  });
}

for (let i = 0; i < count; i += OPEN_AT_ONCE) {
  const batch = [];
  for (let j = i; j < Math.min(count, i + OPEN_AT_ONCE); j++) batch.push(open(j));
  await Promise.all(batch);
}
process.send?.({ opened: count });
process.on('message', (m) => {
  if (m !== 'report') return;
  process.send({ arrivals }, () => {
    for (const s of sockets) s.destroy();
    process.exit(0);
  });
});
