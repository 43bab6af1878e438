/** Every state-machine vector, in the order they are written to clients/spec/state-machine.json. */
import { basicVectors } from './cases-basic.js';
import { circuitlogVectors } from './cases-circuitlog.js';
import { coolingVectors } from './cases-cooling.js';
import { gridVectors } from './cases-grid.js';
import { kindVectors } from './cases-kinds.js';
import { operatorVectors } from './cases-operator.js';
import { quorumVectors } from './cases-quorum.js';
import { staleVectors } from './cases-stale.js';
import { throttleVectors } from './cases-throttle.js';
import { windowVectors } from './cases-window.js';
import type { StateMachineSpec } from './format.js';

export const SPEC_PATH = 'clients/spec/state-machine.json';

export function stateMachineSpec(): StateMachineSpec {
  const vectors = [
    ...basicVectors(),
    ...windowVectors(),
    ...operatorVectors(),
    ...gridVectors(),
    ...circuitlogVectors(),
    ...staleVectors(),
    ...quorumVectors(),
    ...throttleVectors(),
    ...kindVectors(),
    ...coolingVectors(),
  ];
  const ids = new Set<string>();
  for (const v of vectors) {
    if (ids.has(v.id)) throw new Error(`duplicate vector id ${v.id}`);
    ids.add(v.id);
  }
  return {
    format: 'circuitlog-state-machine',
    version: 2,
    generated_by: 'clients/spec/generator/ (npm run spec:generate), from src/domain/',
    vectors,
  };
}

/** The file's text: a vector's fields one a line, each step on one line, stable for diffs. */
export function stateMachineText(): string {
  const spec = stateMachineSpec();
  const vectors = spec.vectors.map((v) => {
    const { steps, ...head } = v;
    const fields = Object.entries(head).map(([k, value]) => `   ${JSON.stringify(k)}: ${JSON.stringify(value)}`);
    const lines = steps.map((s) => `    ${JSON.stringify(s)}`).join(',\n');
    return `  {\n${fields.join(',\n')},\n   "steps": [\n${lines}\n   ]\n  }`;
  });
  const { vectors: _vectors, ...top } = spec;
  const head = Object.entries(top).map(([k, value]) => ` ${JSON.stringify(k)}: ${JSON.stringify(value)}`);
  return `{\n${head.join(',\n')},\n "vectors": [\n${vectors.join(',\n')}\n ]\n}\n`;
}
