import http from 'node:http';

export interface JsonAnswer {
  readonly status: number;
  /** The parsed body, or null when it is empty or not JSON (callers check the status first). */
  readonly json: any;
}

/**
 * One JSON request. Without an `agent` it goes on a fresh connection, so node:cluster hands
 * consecutive requests to different workers.
 */
export function requestJson(
  url: string,
  method = 'GET',
  body?: unknown,
  agent: http.Agent | false = false,
): Promise<JsonAnswer> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      url,
      { method, agent, headers: payload ? { 'content-type': 'application/json' } : {} },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          let json: any = null;
          try {
            json = JSON.parse(text);
          } catch {
            // empty or not JSON
          }
          resolve({ status: res.statusCode ?? 0, json });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}
