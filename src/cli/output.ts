/** Where a command writes: stdout for results, stderr for progress and errors. */
export interface Output {
  out(text: string): void;
  err(text: string): void;
  /** Whether stderr is a terminal (a progress line then rewrites itself). */
  readonly errIsTty: boolean;
}

export const processOutput: Output = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  errIsTty: process.stderr.isTTY === true,
};

/**
 * Rows as a left-aligned table; column widths from `sizing` (the first page), so later pages
 * print as they come and memory stays one page. A longer cell later just pushes its row.
 */
export function tableWidths(header: readonly string[], sizing: readonly (readonly string[])[]): number[] {
  return header.map((h, i) => Math.max(h.length, ...sizing.map((row) => (row[i] ?? '').length)));
}

export function tableLine(cells: readonly string[], widths: readonly number[]): string {
  return `${cells.map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  ')}\n`;
}
