import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/domain/errors.js';

// An AppError is an answer (a refusal, a bad request), rendered and never read for its stack;
// only INTERNAL, a bug, keeps one. A refused /allowed spent about 4 of its 9.5 µs capturing it.
describe('AppError', () => {
  it('is made without a stack trace for an answer, with one for INTERNAL', () => {
    const frames = (e: Error) =>
      (e.stack ?? '').split('\n').filter((line) => line.trimStart().startsWith('at ')).length;
    expect(frames(new AppError('CIRCUIT_OPEN', 'open'))).toBe(0);
    expect(frames(new AppError('VALIDATION_FAILED', 'bad'))).toBe(0);
    expect(frames(new AppError('INTERNAL', 'bug'))).toBeGreaterThan(0);
  });

  it('leaves the process-wide stack limit as it found it', () => {
    const before = Error.stackTraceLimit;
    new AppError('CIRCUIT_OPEN', 'open');
    expect(Error.stackTraceLimit).toBe(before);
    expect(new Error('plain').stack?.split('\n').length).toBeGreaterThan(1);
  });
});
