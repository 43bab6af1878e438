import { describe, expect, it } from 'vitest';
import { loadConfig, parseConfigText } from '../../src/config.js';

describe('metrics and events configuration', () => {
  it('defaults to metrics on, 10,000 labelled circuits, 1,000 streams of at most 1 MiB unsent each', () => {
    const config = loadConfig({}, []);
    expect(config.metrics).toEqual({ enabled: true, max_circuits: 10_000 });
    expect(config.events).toEqual({
      max_streams: 1_000,
      max_stream_buffer_bytes: 1_048_576,
      poll_ms: 200,
      retention: { max_age_days: 30, max_per_circuit: 1_000 },
    });
  });

  it('reads events.max_stream_buffer_bytes and refuses one below 16 KiB', () => {
    expect(parseConfigText('events: { max_stream_buffer_bytes: 65536 }\n', 'f').events.max_stream_buffer_bytes).toBe(
      65_536,
    );
    expect(() => parseConfigText('events: { max_stream_buffer_bytes: 1000 }\n', 'f')).toThrow(
      /events\.max_stream_buffer_bytes/,
    );
  });

  it('reads the keys and names a wrong one', () => {
    const config = parseConfigText('metrics: { enabled: false, max_circuits: 5 }\nevents: { max_streams: 2 }\n', 'f');
    expect([config.metrics, config.events]).toEqual([
      { enabled: false, max_circuits: 5 },
      {
        max_streams: 2,
        max_stream_buffer_bytes: 1_048_576,
        poll_ms: 200,
        retention: { max_age_days: 30, max_per_circuit: 1_000 },
      },
    ]);
    expect(() => parseConfigText('metrics: { max_circuit: 5 }\n', 'f')).toThrow(/metrics/);
    expect(() => parseConfigText('events: { max_streams: 0 }\n', 'f')).toThrow(/events\.max_streams/);
  });
});
