import type { Output } from './output.js';
import { sizeText } from './database-file.js';

const REDRAW_MS = 200; // a terminal's progress line redraws at most 5 times a second

/**
 * A progress line on stderr: on a terminal it rewrites itself (`\r`); elsewhere (a log, a
 * pipe) only the final line is written, so scripts' logs stay one line per backup.
 */
export class ProgressLine {
  private lastDrawMs = 0;

  constructor(
    private readonly io: Output,
    private readonly label: string,
  ) {}

  /** `done` of `total` bytes (total 0 when unknown). */
  update(done: number, total: number): void {
    if (!this.io.errIsTty) return;
    const now = Date.now();
    if (now - this.lastDrawMs < REDRAW_MS) return;
    this.lastDrawMs = now;
    const share = total > 0 ? ` of ${sizeText(total)} (${Math.floor((done / total) * 100)}%)` : '';
    this.io.err(`\r${this.label}: ${sizeText(done)}${share}\x1b[K`);
  }

  finish(text: string): void {
    this.io.err(`${this.io.errIsTty ? '\r\x1b[K' : ''}${this.label}: ${text}\n`);
  }
}
