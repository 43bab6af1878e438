import type { DocSchemas, Operation, Parameter, Values } from './openapi-requests.js';

// Ways to make a valid request invalid by the document, each checked invalid by the
// document's own schemas before it is sent.

/** Texts that break some parameter rule: empty, dot segments, too long, wrong characters, not a number. */
export const BAD_TEXTS = [
  '',
  '.',
  '..',
  'a/../b',
  'a//b',
  '/a',
  'a b',
  'ü',
  '%',
  'x'.repeat(201),
  '-1',
  '0',
  '1.5',
  '1e3',
  'abc',
  '99999999999',
];

/** Values of another JSON type than most members want. */
const WRONG_VALUES: unknown[] = ['x', -1, 1.5, 1e12, true, null, {}, [], ''];

/** The values with one parameter's text replaced by `text`, or null when that leaves it valid or unsendable. */
export function withBadParam(
  schemas: DocSchemas,
  op: Operation,
  values: Values,
  pick: number,
  text: string,
): Values | null {
  const candidates = (op.parameters ?? []).filter((p) => !schemas.paramTextValid(p, text));
  if (candidates.length === 0) return null;
  const param: Parameter = candidates[pick % candidates.length]!;
  // An empty path segment is another route, not a bad value of this one.
  if (param.in === 'path' && text === '') return null;
  const params = new Map(values.params);
  params.set(param, text);
  return { ...values, params };
}

/** A JSON body broken one way: a required member left out, an unknown member, or a member of a wrong value. */
export function withBadBody(schemas: DocSchemas, op: Operation, values: Values, pick: number): Values | null {
  const content = op.requestBody?.content;
  if (content === undefined) return null;
  const type = values.body?.type ?? Object.keys(content)[0]!;
  const schema = content[type]!.schema;
  const original = values.body?.value ?? {};
  const mutants = mutate(original, pick);
  for (const value of mutants) if (!schemas.validator(schema)(value)) return { ...values, body: { type, value } };
  return null;
}

/** Candidate breakages of a value, in an order chosen by `pick`; nested members reached through `outcomes[0]`. */
function mutate(value: unknown, pick: number): unknown[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [{}, [], 'x', 1];
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  const out: unknown[] = [];
  const wrong = WRONG_VALUES[pick % WRONG_VALUES.length];
  for (let i = 0; i < keys.length; i++) {
    const key = keys[(pick + i) % keys.length]!;
    out.push({ ...record, [key]: wrong });
    const { [key]: _left, ...without } = record;
    out.push(without);
    if (Array.isArray(record[key]) && (record[key] as unknown[]).length > 0) {
      const [first, ...rest] = record[key] as unknown[];
      for (const inner of mutate(first, pick)) out.push({ ...record, [key]: [inner, ...rest] });
    }
  }
  out.push({ ...record, unknown_member: 1 }, 'not an object', []);
  return out;
}
