import { AppError } from '../domain/errors.js';

/** At most this many configured names are listed in a 404 (the detail and the `upstreams` member). */
const LISTED_NAMES = 20;
const NAME_CHARS = 64; // of each listed name

/**
 * The 404 for `/proxy/<name>/…` when no upstream has that name: the detail and the problem's
 * `upstreams` member list the configured names (the first 20, each cut to 64 characters), and
 * with none configured the detail says how to configure one.
 */
export function unknownUpstream(name: string, upstreams: ReadonlyMap<string, unknown>): AppError {
  const names = [...upstreams.keys()].slice(0, LISTED_NAMES).map((n) => n.slice(0, NAME_CHARS));
  const more = upstreams.size > names.length ? ` and ${upstreams.size - names.length} more` : '';
  const asked = `No upstream named '${name.slice(0, 100)}'.`;
  const detail =
    names.length === 0
      ? `${asked} No upstreams are configured: point CIRCUITLOG_CONFIG at a YAML file with an 'upstreams' block (see docs/proxy.md).`
      : `${asked} Configured: ${names.join(', ')}${more}.`;
  return new AppError('UPSTREAM_NOT_FOUND', detail, { extensions: { upstreams: names } });
}
