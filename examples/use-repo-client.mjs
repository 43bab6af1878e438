// Resolves `@circuitlog/client` to this repository's build of it (`npm run build`: dist/client/,
// the same source as the package in clients/node), so that the examples import the package by
// its real name and still run from a checkout:
//
//   npm run build && node --import ./examples/use-repo-client.mjs examples/flaky-service.mjs
//
// A service that installed @circuitlog/client needs none of this.

import { register } from 'node:module';

const target = new URL('../dist/client/index.js', import.meta.url).href;
const hooks = `export async function resolve(specifier, context, next) {
  if (specifier === '@circuitlog/client') return { url: ${JSON.stringify(target)}, shortCircuit: true };
  return next(specifier, context);
}`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`);
