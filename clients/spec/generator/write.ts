/** `npm run spec:generate`: writes clients/spec/state-machine.json from src/domain. */
import { writeFileSync } from 'node:fs';
import { SPEC_PATH, stateMachineSpec, stateMachineText } from './vectors.js';

writeFileSync(SPEC_PATH, stateMachineText());
process.stdout.write(`${SPEC_PATH}: ${stateMachineSpec().vectors.length} vectors\n`);
