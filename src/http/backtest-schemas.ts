/** The backtest answer's OpenAPI schemas: lab/backtest-types.ts's shapes, for the document. */
import { z } from '@hono/zod-openapi';
import { z as zod } from 'zod';
import { policyFieldsPatchSchema } from './policy-patch-doc.js';
import {
  backoffSchema,
  kindFields,
  policyFields,
  quorumSchema,
  rampSchema,
  throttleSchema,
  windowSchema,
} from '../policy-schema.js';

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

type JsonSchema = Record<string, unknown>;

/** A numeric policy field's JSON Schema, without its null (a grid value is a number); null: not numeric. */
function numberSchema(field: zod.ZodType): JsonSchema | null {
  const { $schema: _dialect, ...schema } = zod.toJSONSchema(field, { io: 'input', unrepresentable: 'any' });
  const choices = Array.isArray(schema.anyOf) ? (schema.anyOf as JsonSchema[]) : [schema];
  return choices.find((c) => c.type === 'number' || c.type === 'integer') ?? null;
}

/** The grid's paths: every numeric policy field, top-level or one object deep, each a list of its values. */
function gridPaths(): JsonSchema {
  const objects: Record<string, zod.ZodObject> = {
    window: windowSchema,
    backoff: backoffSchema,
    throttle: throttleSchema,
    quorum: quorumSchema,
    ramp: rampSchema,
  };
  const fields: [string, zod.ZodType][] = [
    ...Object.entries({ ...policyFields, ...kindFields }).filter(([name]) => !(name in objects)),
    ...Object.entries(objects).flatMap(([name, o]) =>
      Object.entries(o.shape).map(([member, f]): [string, zod.ZodType] => [`${name}.${member}`, f as zod.ZodType]),
    ),
  ];
  return Object.fromEntries(
    fields.flatMap(([path, f]) => {
      const items = numberSchema(f);
      return items === null ? [] : [[path, { type: 'array', items, minItems: 1, maxItems: 100 }]];
    }),
  );
}

const INSTANT_DOC = {
  // `as const`: literal types, as the document's SchemaObject wants them.
  oneOf: [
    { type: 'integer', minimum: 0, maximum: 8_640_000_000_000_000, description: 'Epoch milliseconds' },
    { type: 'string', format: 'date-time', description: 'ISO 8601 date-time with an offset' },
  ],
} as const;

/**
 * The request body as documented: `policy` is the PATCH body (`PolicyPatch`); the route checks
 * it with BacktestBody (backtest-body.ts) and the merged policy as PATCH does.
 */
export const BACKTEST_BODY_DOC: Record<string, unknown> = {
  type: 'object',
  additionalProperties: false,
  properties: {
    policy: {
      ...policyFieldsPatchSchema(),
      description:
        'The proposed policy: a PATCH /circuits/{name} body (its policy fields; not shadow) merged over the live policy',
    },
    grid: {
      type: 'object',
      minProperties: 1,
      description:
        'Dotted PATCH paths to lists of values; every combination (at most 100, else 400 too-many-combinations) over the proposed policy, ranked; each candidate must be a policy PATCH accepts as a whole (a window needs its type, ...: 422)',
      properties: gridPaths(),
      additionalProperties: false,
    },
    from: { ...INSTANT_DOC, description: 'Start of the range (inclusive); default the oldest entry kept' },
    to: { ...INSTANT_DOC, description: 'End of the range (exclusive), after from; default now' },
    detect_within_seconds: {
      type: 'number',
      exclusiveMinimum: 0,
      maximum: 86_400,
      description: "The grid objective's window, seconds (default 60)",
    },
  },
};
