/** `circuitlog --help`, and `circuitlog <command> --help`. */
const GENERAL = `usage: circuitlog <command> [options]

Commands:
  serve                       start the service (as npm start; env vars configure it, --workers N)
  edge --server <url>         run the edge agent on this host (docs/gateways.md; edge --help)
  ls [--state S]              circuits: name, state, force, failures, window, open until
  get <name>                  one circuit, field by field
  force <name> open|closed|none   force a circuit's state (none removes the force)
  clear <name>                remove a circuit's force (404 if the circuit is unknown)
  reset <name>                close a circuit again (POST /circuits/<name>/reset)
  backup <file>               online backup through the server (GET /admin/backup, token needed)
    --offline | --db <path>     ... or straight from the SQLite file while the server is down
    --overwrite                 replace an existing <file>
    --wait <s>                  keep retrying this long while another backup runs (default 60)
  backtest <circuit> --policy <file> [--grid <file>] [--from T] [--to T] [--svg <file>]
                              replay the circuit's history with its live policy and a proposed one
                              (a policy patch, YAML or JSON): openings, time open, refused calls,
                              flaps, detection, fidelity; T is ISO 8601 or epoch ms
    --db <path>                 ... straight from the SQLite file (read-only), no server needed
  restore <file> [--db <path>]    put a backup in the database's place; refused while a server holds it
  migrate --check [--db <path>]   the database's schema version against this build's
  token create --id <id> --scopes <s,s> [--circuits <p,p>] [--callers <p,p>] [--max-new-circuits N]
                              a fresh random token (256 bits) and its credentials-file entry

Options:
  --url <url>      the server (env CIRCUITLOG_URL; default http://127.0.0.1:8080)
  --token <token>  bearer token (env CIRCUITLOG_TOKEN)
  --json           machine-readable output on stdout
  --timeout <ms>   per request, until the answer starts (default 10000)
  --db <path>      the SQLite file (default: CIRCUITLOG_STORE=sqlite:<path>, CIRCUITLOG_DB, ./data/circuitlog.db)

Exit codes: 0 ok; 1 the server answered an error (404 included) or a file step failed;
2 bad command line; 3 no server answered; migrate --check: 4 migrations pending, 5 database newer.
Names with '/' are fine: they are percent-encoded in the URL. Docs: docs/operations.md#command-line
`;

export function helpText(): string {
  return GENERAL;
}
