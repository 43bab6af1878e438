import { z } from '@hono/zod-openapi';
import { AppError } from '../domain/errors.js';
import { callerField } from './caller-param.js';

/** How far into the future an outcome's `at` may lie (another host's clock running ahead). */
export const OUTCOME_AT_MAX_SKEW_MS = 60_000; // 60 s

/** An outcome's `at`: RFC 3339 date-time, as the API's other times. */
export const outcomeAt = z.iso.datetime({ offset: true }).optional().openapi({
  format: 'date-time',
  example: '2026-11-30T03:30:41.123Z',
  description:
    "When the call ended, by the caller's clock (at most 60 s ahead of the server's). An outcome that ended before the circuit's last state change (1 s tolerance) or before its time window changes nothing (a late outcome). Default: now.",
});

/** `at` as epoch ms; null when absent; a VALIDATION_FAILED naming `field` when too far ahead of `now`. */
export function outcomeTime(at: string | undefined, now: number, field: string): number | undefined {
  if (at === undefined) return undefined;
  const ms = Date.parse(at);
  if (ms - now > OUTCOME_AT_MAX_SKEW_MS) {
    throw new AppError('VALIDATION_FAILED', 'The request body has invalid fields.', {
      fields: [
        {
          field,
          message: `is more than ${OUTCOME_AT_MAX_SKEW_MS / 1000} s ahead of the server's clock (${new Date(now).toISOString()})`,
        },
      ],
    });
  }
  return ms;
}

export const OutcomeBody = z
  .object({
    success: z
      .boolean()
      .openapi({ description: 'true for a successful call, false for a failure. Strings are rejected.' }),
    at: outcomeAt,
    duration_ms: z.number().min(0).max(86_400_000).optional().openapi({
      description:
        "How long the call took, in ms; judged against the window's slow_call_duration_ms and observed by circuitlog_outcome_duration_seconds.",
    }),
    caller: callerField,
  })
  .strict()
  .openapi('OutcomeRequest');
