// `npm run build && node bench/sse-parser.mjs [MiB]`: the client's SSE parser (dist/client/sse.js)
// on one large event fed in 64 KiB chunks, against the parser it replaced (a growing string
// searched from its start on every chunk, kept here as the baseline), in the same run.
import { SseParser } from '../dist/client/sse.js';

/** The replaced parser's hot loop: the whole buffer is searched again for each chunk. */
class Baseline {
  buffer = '';
  decoder = new TextDecoder();
  constructor(onLine) {
    this.onLine = onLine;
  }
  push(chunk) {
    this.buffer += this.decoder.decode(chunk, { stream: true });
    let newline;
    while ((newline = this.buffer.search(/\r\n|\r|\n/)) >= 0) {
      if (this.buffer[newline] === '\r' && newline === this.buffer.length - 1) break;
      const width = this.buffer.startsWith('\r\n', newline) ? 2 : 1;
      this.onLine(this.buffer.slice(0, newline));
      this.buffer = this.buffer.slice(newline + width);
    }
  }
}

const mib = Number(process.argv[2] ?? 16);
const bytes = new TextEncoder().encode('event: transition\ndata: ' + 'a'.repeat(mib * 1024 * 1024) + '\n\n');
const CHUNK = 64 * 1024;
function feed(parser) {
  const started = performance.now();
  for (let i = 0; i < bytes.length; i += CHUNK) parser.push(bytes.subarray(i, i + CHUNK));
  return performance.now() - started;
}
const raised = { maxLineChars: 2 ** 30, maxEventChars: 2 ** 30 }; // to time the whole event
for (let run = 1; run <= 3; run++) {
  const baseline = feed(new Baseline(() => {}));
  let events = 0;
  const parser = feed(new SseParser(() => events++, raised));
  console.log(
    `run ${run}: ${mib} MiB event, 64 KiB chunks: baseline ${baseline.toFixed(0)} ms, parser ${parser.toFixed(1)} ms (${(baseline / parser).toFixed(0)}x), ${events} event`,
  );
}
let error;
const capped = performance.now();
try {
  feed(new SseParser(() => {}));
} catch (e) {
  error = e;
}
console.log(`default limits: ${error?.name} after ${(performance.now() - capped).toFixed(1)} ms (${error?.message})`);
