/**
 * The backtest's picture (`GET /circuits/{name}/backtest/{id}.svg`): time across, the failure
 * rate per minute, and the current and proposed policies' state bands. Signature first.
 */
import type { BacktestResult } from './backtest-types.js';

export interface BacktestSvgOptions {
  readonly width?: number;
  readonly height?: number;
}

/** The picture as an SVG document. */
export function backtestSvg(_result: BacktestResult, _options: BacktestSvgOptions = {}): string {
  throw new Error('not implemented yet');
}
