/**
 * The one way the program prints a URL (a Redis, Sentinel or Cluster URL, an upstream node's):
 * what is secret is replaced by `***`, whether or not the URL parses.
 *
 * - The password of the userinfo (`user:***@`), and the whole userinfo when it has no `:` (a
 *   lone userinfo may be a token). The userinfo ends at the last `@` before the query, else at
 *   the last `@` of all: a password with an unencoded `@`, `/`, `?` or `#` is hidden whole.
 * - The value of every query parameter whose name, percent-decoded (`sentinel%5Fpassword`),
 *   contains `password`, `token`, `secret` or `key` (any case; `tls_key` too).
 *
 * When a URL is too odd to tell, more is hidden rather than less.
 */
export function redactUrl(raw: string): string {
  const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.exec(raw)?.[0] ?? '';
  const rest = raw.slice(scheme.length);
  const firstQuery = rest.indexOf('?');
  let at = firstQuery === -1 ? rest.lastIndexOf('@') : rest.lastIndexOf('@', firstQuery);
  if (at === -1) at = rest.lastIndexOf('@'); // a '?' in the password: the userinfo ends at the last '@'
  const userinfo = at === -1 ? '' : rest.slice(0, at);
  const afterUserinfo = at === -1 ? rest : rest.slice(at + 1);
  const query = afterUserinfo.indexOf('?');
  const address = query === -1 ? afterUserinfo : afterUserinfo.slice(0, query);
  const shownQuery = query === -1 ? '' : `?${redactQuery(afterUserinfo.slice(query + 1))}`;
  return `${scheme}${redactUserinfo(userinfo, at !== -1)}${address}${shownQuery}`;
}

const SECRET_NAME = /password|token|secret|key/i;

function redactUserinfo(userinfo: string, present: boolean): string {
  if (!present) return '';
  const colon = userinfo.indexOf(':');
  return colon === -1 ? '***@' : `${userinfo.slice(0, colon)}:***@`;
}

/**
 * `a=1&sentinel_password=x` -> `a=1&sentinel_password=***`. Pieces without `=` right after a
 * secret are taken for part of it (`sentinel_password=a&b`: an unencoded `&` in the password).
 */
function redactQuery(query: string): string {
  const shown: string[] = [];
  let inSecret = false;
  for (const pair of query.split('&')) {
    if (inSecret && !pair.includes('=')) continue;
    const name = pair.includes('=') ? pair.slice(0, pair.indexOf('=')) : pair;
    inSecret = SECRET_NAME.test(decodedName(name));
    shown.push(inSecret ? `${name}=***` : pair);
  }
  return shown.join('&');
}

/** The name as the parsers read it (URLSearchParams: `+` is a space, a valid `%XX` a byte, anything else as written). */
function decodedName(name: string): string {
  return [...new URLSearchParams(`${name}=`).keys()][0] ?? name;
}
