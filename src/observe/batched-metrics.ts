import { Counter, type Registry } from 'prom-client';

/**
 * Hot-path counting for the per-request metrics. prom-client's `inc`/`observe` validate the
 * labels and hash them into a key on every call (about 3 µs per proxied request for four
 * series); here the caller gives a cheap string key, the labels object is kept from the first
 * call, and the amounts wait in plain slots until a scrape asks for them.
 */
type Labels = Record<string, string>;

interface CounterSlot {
  readonly labels: Labels;
  pending: number;
}

/** A prom-client Counter fed at scrape time (its `collect` hook) from per-key pending counts. */
export class BatchedCounter {
  private readonly slots = new Map<string, CounterSlot>();
  constructor(config: { name: string; help: string; labelNames: string[]; registers: Registry[] }) {
    const slots = this.slots;
    new Counter({
      ...config,
      collect(this: Counter) {
        for (const slot of slots.values()) {
          if (slot.pending === 0) continue;
          this.inc(slot.labels, slot.pending);
          slot.pending = 0;
        }
      },
    });
  }

  /** Count one for `key` when its series exists; false (nothing counted) before its first `inc`. */
  incKnown(key: string): boolean {
    const slot = this.slots.get(key);
    if (slot === undefined) return false;
    slot.pending += 1;
    return true;
  }

  /** Count one for `labels`; `key` must be unique per label set (labels are read only the first time). */
  inc(key: string, labels: Labels): void {
    const slot = this.slots.get(key);
    if (slot) slot.pending += 1;
    else this.slots.set(key, { labels, pending: 1 });
  }
}

interface HistogramSeries {
  readonly labels: Labels;
  readonly buckets: number[]; // not cumulative: buckets[i] counts values in (bound[i-1], bound[i]]
  sum: number;
  count: number;
}

/** prom-client's default buckets (Histogram in prom-client 15.1.3). */
export const DEFAULT_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * A histogram registered in a prom-client Registry as a custom metric object. prom-client 15.1.3
 * has no public way to add bucket counts in bulk, so this produces the same `get()` and
 * `getForPromString()` shapes as its Histogram (lib/histogram.js): per series the cumulative
 * `_bucket` values with `le`, then `+Inf`, `_sum`, `_count`; aggregator `sum`, so the
 * AggregatorRegistry sums it across workers like a Histogram.
 */
export class BatchedHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  private readonly bounds: readonly number[];
  private readonly series = new Map<string, HistogramSeries>();

  constructor(config: { name: string; help: string; registers: Registry[]; buckets?: readonly number[] }) {
    this.name = config.name;
    this.help = config.help;
    this.bounds = config.buckets ?? DEFAULT_BUCKETS;
    for (const r of config.registers) r.registerMetric(this as never);
  }

  /** `observe` for a series that exists; false (nothing observed) before its first `observe`. */
  observeKnown(key: string, value: number): boolean {
    const s = this.series.get(key);
    if (s === undefined) return false;
    if (Number.isFinite(value)) this.add(s, value);
    return true;
  }

  /** Observe `value` for `labels`; `key` must be unique per label set. Non-finite values are dropped. */
  observe(key: string, labels: Labels, value: number): void {
    if (!Number.isFinite(value)) return;
    let s = this.series.get(key);
    if (!s) {
      s = { labels, buckets: new Array<number>(this.bounds.length).fill(0), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    this.add(s, value);
  }

  private add(s: HistogramSeries, value: number): void {
    s.sum += value;
    s.count += 1;
    const b = this.bounds;
    for (let i = 0; i < b.length; i++) {
      if (value <= b[i]!) {
        s.buckets[i]! += 1;
        break;
      }
    }
  }

  reset(): void {
    this.series.clear();
  }

  /** The shape Registry.getMetricsAsString reads (labels `le` plus the series as sharedLabels). */
  async getForPromString() {
    const values: {
      labels: Record<string, string | number>;
      sharedLabels: Labels;
      value: number;
      metricName: string;
      exemplar: null | undefined;
    }[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.series.values()) {
      let acc = 0;
      this.bounds.forEach((le, i) => {
        acc += s.buckets[i]!;
        values.push({ labels: { le }, sharedLabels: s.labels, value: acc, metricName: bucket, exemplar: null });
      });
      values.push({
        labels: { le: '+Inf' },
        sharedLabels: s.labels,
        value: s.count,
        metricName: bucket,
        exemplar: null,
      });
      values.push({
        labels: {},
        sharedLabels: s.labels,
        value: s.sum,
        metricName: `${this.name}_sum`,
        exemplar: undefined,
      });
      values.push({
        labels: {},
        sharedLabels: s.labels,
        value: s.count,
        metricName: `${this.name}_count`,
        exemplar: undefined,
      });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** The shape getMetricsAsJSON (and so the cluster AggregatorRegistry) reads: labels splayed. */
  async get() {
    const data = await this.getForPromString();
    const values = data.values.map(({ labels, sharedLabels, ...rest }) => ({
      ...rest,
      labels: { ...labels, ...sharedLabels },
    }));
    return { ...data, values };
  }
}
