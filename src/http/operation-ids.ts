/**
 * Every operation's `operationId` in the OpenAPI document, in one table: stable, verb-first
 * names that generated clients use as method names (without them generators invent names
 * like `getCircuitsByNameAllowed`). Renaming one breaks generated clients: add, never rename.
 * `test/http/openapi-clients.test.ts` checks every documented operation has one here.
 */
export const OPERATION_IDS: Readonly<Record<string, string>> = {
  'get /circuits': 'listCircuits',
  'get /circuits/{name}': 'getCircuit',
  'patch /circuits/{name}': 'updateCircuitPolicy',
  'delete /circuits/{name}': 'deleteCircuit',
  'get /circuits/{name}/allowed': 'checkAllowed',
  'post /circuits/{name}/outcomes': 'recordOutcome',
  'post /outcomes': 'recordOutcomes',
  'get /circuits/{name}/events': 'listCircuitEvents',
  'post /circuits/{name}/call': 'callCircuit',
  'post /circuits/{name}/success': 'recordSuccess',
  'post /circuits/{name}/failure': 'recordFailure',
  'post /circuits/{name}/reset': 'resetCircuit',
  'post /circuits/{name}/backtest': 'runBacktest',
  'get /circuits/{name}/backtest/{id}.svg': 'getBacktestPicture',
  'get /health': 'getHealth',
  'get /health/ready': 'getReadiness',
  'get /admin/backup': 'getBackup',
  'get /audit': 'listAuditEntries',
  'get /whoami': 'getIdentity',
  'get /problems/{kind}': 'getProblemType',
  'get /metrics': 'getMetrics',
  'get /events/stream': 'streamEvents',
  'get /dashboard': 'getDashboard',
  'get /dashboard/api/state': 'getDashboardState',
  'get /proxy/{upstream}/{path}': 'proxyGet',
  'head /proxy/{upstream}/{path}': 'proxyHead',
  'post /proxy/{upstream}/{path}': 'proxyPost',
  'put /proxy/{upstream}/{path}': 'proxyPut',
  'patch /proxy/{upstream}/{path}': 'proxyPatch',
  'delete /proxy/{upstream}/{path}': 'proxyDelete',
  'options /proxy/{upstream}/{path}': 'proxyOptions',
};

/**
 * Where the API is served: relative, so the document's own origin (OpenAPI 3.1 section 4.8.5.1:
 * a relative url is relative to where the document is served). Swagger UI's "Try it out" then
 * reaches the server it was loaded from, whatever its host and port.
 */
export const SERVERS = [{ url: '/', description: 'This server (the origin serving this document)' }];
