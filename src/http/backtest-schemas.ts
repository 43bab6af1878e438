/** The backtest answer's OpenAPI schemas: lab/backtest-types.ts's shapes, for the document. */
import { z } from '@hono/zod-openapi';

const EpochMs = z.number().int().describe('Epoch milliseconds');

const LabTransitionSchema = z.object({ from: z.string(), to: z.string(), reason: z.string(), at: EpochMs });

const MinuteSchema = z.object({
  t: EpochMs.describe("The minute's start"),
  outcomes: z.number().int(),
  failures: z.number().int(),
  refused: z.number().int().describe('Recorded outcomes this policy would have refused'),
  open_ms: z.number(),
  half_open_ms: z.number(),
});

const figureFields = {
  openings: z.number().int(),
  time_open_ms: z.number(),
  longest_open_ms: z.number(),
  refused_calls: z
    .number()
    .int()
    .describe('Recorded outcomes that arrived while this replay refused calls: counted, not fed to the machine'),
  flaps: z.number().int().describe('Openings within one open time of the previous closing'),
  detection_ms: z.array(z.number()).describe('Per opening: ms from the first failure of its burst to the opening'),
  transitions_total: z.number().int(),
};

const RunFiguresSchema = z
  .object({
    ...figureFields,
    transitions: z.array(LabTransitionSchema).describe('Oldest first, at most 10,000'),
    series: z.array(MinuteSchema),
    series_bucket_ms: z
      .number()
      .int()
      .describe('How long each point of series covers (a minute, or more for long ranges)'),
  })
  .openapi('BacktestFigures');

const FidelitySchema = z
  .object({
    matched: z.number().int(),
    recorded: z.number().int(),
    ratio: z.number().min(0).max(1),
    first_mismatch: z
      .object({ recorded: LabTransitionSchema.nullable(), replayed: LabTransitionSchema.nullable() })
      .nullable(),
    manual_actions: z.number().int(),
  })
  .openapi('BacktestFidelity');

const common = {
  id: z.string().describe('The answer’s id: GET /circuits/{name}/backtest/{id}.svg draws it while it is kept'),
  circuit: z.string(),
  from: EpochMs,
  to: EpochMs,
  outcomes: z.number().int().describe('Recorded outcomes replayed'),
  start: z
    .enum(['created', 'assumed_closed'])
    .describe(
      "created: the range starts at the circuit's creation; assumed_closed: mid-history, closed and empty assumed",
    ),
  skipped: z.number().int().describe('Stored entries that could not be decoded: skipped'),
};

export const BacktestResultSchema = z
  .object({ ...common, current: RunFiguresSchema, proposed: RunFiguresSchema, fidelity: FidelitySchema })
  .openapi('BacktestResult');

const GridFigures = z.object(figureFields);

export const GridResultSchema = z
  .object({
    ...common,
    objective: z.string().describe('The ranking, in words'),
    outages: z.number().int().describe('Recorded openings that lasted over one open time'),
    current: GridFigures,
    candidates: z.array(
      z.object({
        values: z.record(z.string(), z.number()),
        figures: GridFigures,
        outages_caught: z.number().int(),
        meets_objective: z.boolean(),
        rank: z.number().int(),
      }),
    ),
  })
  .openapi('BacktestGridResult');

export const BacktestAnswerSchema = z.union([BacktestResultSchema, GridResultSchema]);
