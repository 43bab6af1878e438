import http from 'node:http';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import { generateSync } from 'json-schema-faker';

// Requests generated from the OpenAPI document itself (json-schema-faker), the answers
// checked against it (ajv): what the contract test in this folder needs.

type Schema = Record<string, unknown>;

export interface Parameter {
  readonly name: string;
  readonly in: 'path' | 'query' | 'header';
  readonly required?: boolean;
  readonly schema: Schema;
}

export interface Response {
  readonly content?: Record<string, { schema?: Schema }>;
}

export interface Operation {
  readonly parameters?: Parameter[];
  readonly requestBody?: { required?: boolean; content: Record<string, { schema: Schema }> };
  readonly responses: Record<string, Response>;
  readonly security?: unknown[];
}

export interface Doc {
  readonly paths: Record<string, Record<string, Operation>>;
  readonly components: Record<string, unknown>;
}

export interface Sent {
  readonly method: string;
  /** As sent: percent-encoded, never normalised. */
  readonly target: string;
  readonly headers: Record<string, string>;
  readonly body?: string;
}

export interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

/** An operation's parameters and body, as values (before they are written into a request). */
export interface Values {
  readonly params: Map<Parameter, unknown>;
  readonly body?: { readonly type: string; readonly value: unknown };
}

// ajv-formats is CommonJS: its default export is the module object under TypeScript's view.
const addFormats = ajvFormats as unknown as typeof ajvFormats.default;

/** Validators for the document's schemas, `$ref`s resolved against its components. */
export class DocSchemas {
  private readonly ajv = addFormats(new Ajv2020({ strict: false, allErrors: true }));
  private readonly cache = new Map<Schema, ValidateFunction>();

  constructor(readonly doc: Doc) {}

  /** The schema with the document's components beside it, so its `$ref`s resolve. */
  rooted(schema: Schema): Schema {
    return { ...schema, components: this.doc.components };
  }

  validator(schema: Schema): ValidateFunction {
    let validate = this.cache.get(schema);
    if (validate === undefined) {
      validate = this.ajv.compile(this.rooted(schema));
      this.cache.set(schema, validate);
    }
    return validate;
  }

  /** Whether a parameter's text (as the URL or header carries it) is what its schema allows. */
  paramTextValid(param: Parameter, text: string): boolean {
    const type = param.schema.type;
    if (type === 'integer' || type === 'number') {
      if (!/^-?\d+(\.\d+)?$/.test(text)) return false;
      return this.validator(param.schema)(Number(text));
    }
    return this.validator(param.schema)(text);
  }

  errorsText(validate: ValidateFunction): string {
    return this.ajv.errorsText(validate.errors);
  }
}

/** One value from a schema, by json-schema-faker with this seed; outcome times never after `latest`. */
export function sample(schemas: DocSchemas, schema: Schema, seed: number, latest: Date): unknown {
  return generateSync(schemas.rooted(schema), { seed, maxDateTime: latest.toISOString(), maxItems: 5 });
}

/** Generate an operation's values: required parameters always, optional ones by the seed. */
export function validValues(schemas: DocSchemas, op: Operation, seed: number, latest: Date): Values {
  const params = new Map<Parameter, unknown>();
  (op.parameters ?? []).forEach((param, i) => {
    if (param.required || (seed >> i) & 1) params.set(param, sample(schemas, param.schema, seed + i, latest));
  });
  const content = op.requestBody?.content;
  if (content === undefined || (!op.requestBody?.required && seed % 4 === 0)) return { params };
  const types = Object.keys(content);
  const type = types[seed % types.length]!;
  return { params, body: { type, value: sample(schemas, content[type]!.schema, seed + 101, latest) } };
}

/** Whether every value is what the document allows (json-schema-faker cannot honour every pattern's lookahead). */
export function valuesValid(schemas: DocSchemas, op: Operation, values: Values): boolean {
  for (const [param, value] of values.params) if (!schemas.paramTextValid(param, String(value))) return false;
  if (values.body === undefined) return true;
  return schemas.validator(op.requestBody!.content[values.body.type]!.schema)(values.body.value);
}

/**
 * A path parameter in the URL: percent-encoded, '.' too (a '..' would be resolved away
 * before routing). The proxy's `path` keeps its '/' and '.' (the document says so).
 */
function encodePathValue(name: string, path: string, text: string): string {
  if (path.startsWith('/proxy/') && name === 'path') return text.split('/').map(encodeURIComponent).join('/');
  return encodeURIComponent(text).replace(/\./g, '%2E');
}

/** The request for these values, or null when they cannot be written into one (a header must be visible ASCII). */
export function requestOf(method: string, path: string, values: Values, headers: Record<string, string>): Sent | null {
  let target = path;
  const query: string[] = [];
  const sent: Record<string, string> = { ...headers };
  for (const [param, value] of values.params) {
    const text = String(value);
    if (param.in === 'path') target = target.replace(`{${param.name}}`, encodePathValue(param.name, path, text));
    else if (param.in === 'query') query.push(`${encodeURIComponent(param.name)}=${encodeURIComponent(text)}`);
    else if (/^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(text)) sent[param.name] = text;
    else return null;
  }
  if (query.length > 0) target += `?${query.join('&')}`;
  if (values.body === undefined) return { method: method.toUpperCase(), target, headers: sent };
  sent['content-type'] = values.body.type;
  return { method: method.toUpperCase(), target, headers: sent, body: JSON.stringify(values.body.value) };
}

/** Send one request with its target as is; an event stream is closed once its head arrives. */
export function send(base: string, request: Sent): Promise<Answer> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        hostname,
        port,
        method: request.method,
        path: request.target,
        // Framed even on a GET (Node sends a GET's body unframed otherwise: another request to the server).
        headers: {
          ...request.headers,
          ...(request.body !== undefined && { 'content-length': Buffer.byteLength(request.body) }),
        },
        agent: false,
      },
      (res) => {
        if ((res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
          res.destroy();
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: '' });
          return;
        }
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }),
        );
      },
    );
    req.setTimeout(10_000, () => req.destroy(new Error(`no answer to ${request.method} ${request.target}`)));
    req.on('error', reject);
    req.end(request.body);
  });
}

const isJson = (mediaType: string) => /^application\/(.+\+)?json$/.test(mediaType);

/**
 * Why an answer is not one the operation documents (its status, or `default`; a media type
 * covering its Content-Type; its schema), or null when it is.
 */
export function answerProblem(schemas: DocSchemas, op: Operation, answer: Answer, method: string): string | null {
  const response = op.responses[String(answer.status)] ?? op.responses.default;
  if (response === undefined) return `status ${answer.status} is not documented`;
  if (response.content === undefined) return null;
  const mediaType = (answer.headers['content-type'] ?? '').split(';')[0]!.trim();
  // The most specific media range that covers it (RFC 9110 section 12.5.1).
  const media =
    response.content[mediaType] ?? response.content[`${mediaType.split('/')[0]}/*`] ?? response.content['*/*'];
  if (media === undefined)
    return `${answer.status}: '${mediaType}' is not one of ${Object.keys(response.content).join(', ')}`;
  if (method === 'HEAD' || media.schema === undefined || Object.keys(media.schema).length === 0 || !isJson(mediaType))
    return null; // a HEAD answer has the head of a GET's and no body (RFC 9110 section 9.3.2)
  let value: unknown;
  try {
    value = JSON.parse(answer.body);
  } catch {
    return `${answer.status}: the ${mediaType} body is not JSON`;
  }
  const validate = schemas.validator(media.schema);
  return validate(value) ? null : `${answer.status}: ${schemas.errorsText(validate)}`;
}
