import { circuitNameProblem } from '../domain/circuit-name.js';
import { type ApiTarget, circuitPath, jsonOf, send } from './api.js';
import { usageError } from './exit-codes.js';
import { type Output, tableLine, tableWidths } from './output.js';

/** The fields of a circuit the table shows (the API sends more: docs/api.md). */
interface CircuitView {
  readonly name: string;
  readonly state: string;
  readonly forced_state: string | null;
  readonly failure_count: number;
  readonly failure_threshold: number;
  readonly window_stats?: { calls: number; failures: number };
  readonly open_until: string | null;
}

const STATES = ['closed', 'open', 'half_open'];
const PAGE_LIMIT = 500; // the API's largest page
const HEADER = ['NAME', 'STATE', 'FORCED', 'FAILURES', 'WINDOW', 'OPEN UNTIL'];

function checkedName(name: string): string {
  const problem = circuitNameProblem(name);
  if (problem) throw usageError(`'${name}' is not a circuit name: ${problem}`);
  return name;
}

function row(c: CircuitView): string[] {
  const window = c.window_stats ? `${c.window_stats.failures}/${c.window_stats.calls}` : '-';
  return [
    c.name,
    c.state,
    c.forced_state ?? '-',
    `${c.failure_count}/${c.failure_threshold}`,
    window,
    c.open_until ?? '-',
  ];
}

/** `ls [--state s]`: every circuit, page by page (`next_cursor`), as a table or a JSON array. */
export async function listCircuits(target: ApiTarget, state: string | undefined, json: boolean, io: Output) {
  if (state !== undefined && !STATES.includes(state))
    throw usageError(`--state: must be ${STATES.join(', ')}, got '${state}'`);
  let cursor: string | null = null;
  let widths: number[] | null = null;
  let count = 0;
  do {
    const query = new URLSearchParams({ limit: String(PAGE_LIMIT) });
    if (state) query.set('state', state);
    if (cursor) query.set('cursor', cursor);
    const page = await jsonOf<{ circuits: CircuitView[]; next_cursor: string | null }>(
      await send(target, 'GET', `/circuits?${query}`),
    );
    if (json) {
      for (const circuit of page.circuits) io.out(`${count++ === 0 ? '[' : ','}\n${JSON.stringify(circuit)}`);
    } else {
      const rows = page.circuits.map(row);
      if (widths === null) {
        widths = tableWidths(HEADER, rows);
        io.out(tableLine(HEADER, widths));
      }
      for (const cells of rows) io.out(tableLine(cells, widths));
      count += rows.length;
    }
    cursor = page.next_cursor;
  } while (cursor !== null);
  if (json) io.out(count === 0 ? '[]\n' : '\n]\n');
}

/** `get <name>`: one circuit, field by field, or its JSON. */
export async function getCircuit(target: ApiTarget, name: string, json: boolean, io: Output): Promise<void> {
  const circuit = await jsonOf<Record<string, unknown>>(await send(target, 'GET', circuitPath(checkedName(name))));
  if (json) return io.out(`${JSON.stringify(circuit)}\n`);
  const fields = Object.entries(circuit).map(([key, value]) => [
    key,
    typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value),
  ]);
  const width = Math.max(...fields.map(([key]) => key!.length));
  for (const [key, value] of fields) io.out(`${key!.padEnd(width)}  ${value}\n`);
}

const FORCES: Record<string, 'open' | 'closed' | null> = { open: 'open', closed: 'closed', none: null };

/** `force <name> open|closed|none`: PATCH forced_state (creating the circuit with the defaults, as the API does). */
export async function forceCircuit(target: ApiTarget, name: string, force: string, json: boolean, io: Output) {
  if (!Object.hasOwn(FORCES, force)) throw usageError(`force: must be open, closed or none, got '${force}'`);
  return patchForce(target, checkedName(name), FORCES[force] ?? null, json, io);
}

/** `clear <name>`: remove a force; an unknown circuit is a 404 (and is not created). */
export async function clearForce(target: ApiTarget, name: string, json: boolean, io: Output): Promise<void> {
  await send(target, 'GET', circuitPath(checkedName(name)));
  return patchForce(target, name, null, json, io);
}

async function patchForce(
  target: ApiTarget,
  name: string,
  forced: 'open' | 'closed' | null,
  json: boolean,
  io: Output,
): Promise<void> {
  const answer = await send(target, 'PATCH', circuitPath(name), {
    body: { forced_state: forced },
    contentType: 'application/merge-patch+json',
  });
  const circuit = await jsonOf<CircuitView>(answer);
  if (json) return io.out(`${JSON.stringify(circuit)}\n`);
  const created = answer.status === 201 ? ' (created with the defaults)' : '';
  const what = forced === null ? 'no force' : `forced ${forced}`;
  io.out(`${name}: ${what}, state ${circuit.state}${created}\n`);
}

/** `reset <name>`: POST /reset, closing the circuit; 404 if unknown. */
export async function resetCircuit(target: ApiTarget, name: string, json: boolean, io: Output): Promise<void> {
  const circuit = await jsonOf<CircuitView>(await send(target, 'POST', circuitPath(checkedName(name), '/reset')));
  if (json) return io.out(`${JSON.stringify(circuit)}\n`);
  io.out(`${name}: reset, state ${circuit.state}, failures ${circuit.failure_count}\n`);
}
