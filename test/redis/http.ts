import http from 'node:http';

export interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly text: string;
  readonly json: any;
}

/** One request with a fresh connection; rejects if no answer within `limitMs` (a hang, not a slow answer). */
export function request(url: string, method = 'GET', limitMs = 10_000, body?: unknown): Promise<Answer> {
  const payload = body === undefined ? (method === 'POST' ? '{}' : undefined) : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = payload === undefined ? {} : { 'content-type': 'application/json' };
    const req = http.request(url, { method, agent: false, timeout: limitMs, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        let json: unknown = null;
        try {
          json = text ? JSON.parse(text) : null;
        } catch {
          json = null;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${limitMs} ms: ${method} ${url}`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** Poll `probe` until it is true, every 50 ms, at most `limitMs`; answers whether it became true. */
export async function eventually(probe: () => Promise<boolean>, limitMs = 10_000): Promise<boolean> {
  const until = Date.now() + limitMs;
  while (Date.now() < until) {
    if (await probe().catch(() => false)) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

/** Is Redis event cursor `a` past `b`: at or past it on every shard, and past it on one (ids are opaque to clients; tests may look inside). */
export function cursorAfter(a: string, b: string): boolean {
  const [x, y] = [a.split('.').map(Number), b.split('.').map(Number)];
  return x.length === y.length && x.every((n, i) => n >= y[i]!) && x.some((n, i) => n > y[i]!);
}
