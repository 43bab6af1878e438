import { Counter, Gauge, type Registry } from 'prom-client';
import { BatchedCounter, BatchedHistogram } from './batched-metrics.js';
import { OverloadMetrics } from './overload-metrics.js';

/** The counters and histogram of circuit outcomes, transitions and rejections. */
export function circuitInstruments(registers: Registry[]) {
  const transitions = new Counter({
    name: 'circuitlog_transitions_total',
    help: 'State transitions of circuits',
    labelNames: ['circuit', 'from', 'to', 'reason'],
    registers,
  });
  const detectOnly = new Counter({
    name: 'circuitlog_detect_only_transitions_total',
    help: 'Transitions, withheld trips and caller isolations the rules made while the circuit was forced closed (what the policy would have done); not in circuitlog_transitions_total',
    labelNames: ['circuit', 'from', 'to', 'reason'],
    registers,
  });
  const outcomes = new BatchedCounter({
    name: 'circuitlog_outcomes_total',
    help: 'Outcomes recorded, whatever the route',
    labelNames: ['circuit', 'outcome'],
    registers,
  });
  const slowCalls = new Counter({
    name: 'circuitlog_slow_calls_total',
    help: 'Outcomes at or over the circuit slow-call duration',
    labelNames: ['circuit'],
    registers,
  });
  const rejections = new Counter({
    name: 'circuitlog_calls_rejected_total',
    help: 'Calls refused by a circuit',
    labelNames: ['circuit'],
    registers,
  });
  const outcomeDuration = new BatchedHistogram({
    name: 'circuitlog_outcome_duration_seconds',
    help: 'duration_ms of recorded outcomes that carry one',
    registers,
  });
  return { transitions, detectOnly, outcomes, slowCalls, rejections, outcomeDuration };
}

/** The proxy's counters, histogram, overload metrics and panic gauge. */
export function proxyInstruments(registers: Registry[]) {
  const proxyRequests = new BatchedCounter({
    name: 'circuitlog_proxy_requests_total',
    help: 'Proxied requests by the status sent to the caller and the node that answered',
    labelNames: ['upstream', 'node', 'dc', 'status'],
    registers,
  });
  const proxyDuration = new BatchedHistogram({
    name: 'circuitlog_proxy_request_duration_seconds',
    help: 'Time from a proxied request to the head of its answer',
    registers,
  });
  const fallbacks = new Counter({
    name: 'circuitlog_proxy_fallbacks_total',
    help: 'Fallback answers served',
    labelNames: ['upstream', 'kind'],
    registers,
  });
  const degraded = new Counter({
    name: 'circuitlog_proxy_degraded_total',
    help: 'Answers sent with X-Degraded: true (a node of another DC, or a fallback)',
    labelNames: ['upstream'],
    registers,
  });
  const overload = new OverloadMetrics(registers);
  const coalesced = new Counter({
    name: 'circuitlog_proxy_coalesced_total',
    help: "Proxied requests answered from another request's call (coalescing)",
    labelNames: ['upstream'],
    registers,
  });
  const sendTimeouts = new Counter({
    name: 'circuitlog_proxy_send_timeouts_total',
    help: 'Callers cut off after send_timeout_ms without taking any of the answer bytes waiting for them',
    labelNames: ['upstream'],
    registers,
  });
  const healthChecks = new Counter({
    name: 'circuitlog_health_checks_total',
    help: 'Active health checks of proxy nodes',
    labelNames: ['upstream', 'node', 'result'],
    registers,
  });
  // 'max' across workers: 1 while any worker serves the upstream in panic (each reads the nodes itself).
  const panic = new Gauge({
    name: 'circuitlog_proxy_panic',
    help: 'Whether the upstream is in panic (panic_threshold_percent): 1 while node breakers are not honoured',
    labelNames: ['upstream'],
    aggregator: 'max',
    registers,
  });
  return { proxyRequests, proxyDuration, fallbacks, degraded, overload, coalesced, sendTimeouts, healthChecks, panic };
}
