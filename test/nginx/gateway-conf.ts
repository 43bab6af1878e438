// The nginx setup docs/gateways.md documents (issue 32), as the tests run it: every request asks
// the edge agent's check route first (`auth_request` to `/gate/<circuit>`), a refusal becomes a
// 503 problem with `Retry-After` (`error_page 403 = @circuit_open`), and the access log goes to
// the agent over syslog in the `circuitlog` log_format, from which the agent makes outcomes.

import { NGINX_LOG_FORMAT } from '../../src/edge/nginx-log.js';

export interface GatewayOptions {
  /** `listen` address (`127.0.0.1:PORT`). */
  readonly listen: string;
  /** The circuit guarding the upstream. */
  readonly circuit: string;
  /** The caller the outcomes and checks name (this nginx instance); empty: none. */
  readonly caller: string;
  /** The edge agent's HTTP port (`--listen`) and syslog port (`--syslog`), on 127.0.0.1. */
  readonly agentPort: number;
  readonly syslogPort: number;
  /** The protected service, on 127.0.0.1. */
  readonly upstreamPort: number;
}

/** The `http {}` content: the log_format and one `server` guarding the upstream with the circuit. */
export function gatewayHttp(o: GatewayOptions): string {
  return `    ${NGINX_LOG_FORMAT}

    # The refusal's JSON members: the agent's header as a JSON string, or null when it sent none.
    map $circuitlog_state $circuitlog_state_json { "" null; default "\\"$circuitlog_state\\""; }
    map $circuitlog_open_until $circuitlog_open_until_json { "" null; default "\\"$circuitlog_open_until\\""; }

    # The agent, over kept-alive connections (no TCP handshake per check).
    upstream circuitlog_edge {
        server 127.0.0.1:${o.agentPort};     # the agent's --listen
        keepalive 16;
    }

    server {
        listen ${o.listen};

        # The circuit that guards this server's upstream, and who this nginx is to circuitlog.
        set $circuitlog_circuit ${o.circuit};
        set $circuitlog_caller "${o.caller}";

        # One log line per request to the agent (UDP, loopback); a refused request names no
        # upstream status, so it reports no outcome.
        access_log syslog:server=127.0.0.1:${o.syslogPort},tag=circuitlog,nohostname circuitlog;

        location / {
            auth_request /_circuitlog_gate;
            auth_request_set $circuitlog_retry_after $upstream_http_retry_after;
            auth_request_set $circuitlog_state $upstream_http_x_circuit_state;
            auth_request_set $circuitlog_open_until $upstream_http_x_circuit_open_until;
            error_page 403 = @circuit_open;

            proxy_pass http://127.0.0.1:${o.upstreamPort};   # the protected service
        }

        # The check: a GET subrequest without the body; 2xx lets the request through, 403 refuses it.
        location = /_circuitlog_gate {
            internal;
            proxy_pass http://circuitlog_edge/gate/$circuitlog_circuit;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Original-URI $request_uri;
            proxy_set_header X-Circuitlog-Caller $circuitlog_caller;
            proxy_connect_timeout 1s;
            proxy_read_timeout 5s;
        }

        # A refusal: nginx answers itself, a 503 problem like circuitlog's own, without the upstream.
        location @circuit_open {
            default_type application/problem+json;
            add_header Retry-After $circuitlog_retry_after always;
            add_header X-Circuit-State $circuitlog_state always;
            return 503 '{"type":"/problems/circuit-open","title":"Circuit is open","status":503,"detail":"Circuit $circuitlog_circuit refuses calls; retry after $circuitlog_retry_after s.","code":"CIRCUIT_OPEN","circuit":"$circuitlog_circuit","state":$circuitlog_state_json,"open_until":$circuitlog_open_until_json}\\n';
        }
    }`;
}
