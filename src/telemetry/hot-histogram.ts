// A histogram for observations on the hot path (per audio frame, per upstream message), by hand
// rather than prom-client's: its observe() validates the labels, hashes them into a string and
// allocates on every call (about 1.5 µs measured; this one about 0.05 µs). The label values are
// fixed when it is made, each a child with preallocated bucket counts; it registers in the same
// registry and /metrics shows it as prom-client shows a histogram (cumulative `_bucket` by `le`,
// `_sum`, `_count`), every label value from the start.
import type { Metric, Registry } from 'prom-client';

export class HotHistogramChild {
  /** counts[i]: observations in (bounds[i-1], bounds[i]]; the last slot is above every bound. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) return;
    let b = 0;
    while (b < this.bounds.length && value > this.bounds[b]) b++;
    this.counts[b]++;
    this.sum += value;
    this.count++;
  }
}

type Value = { labels: Record<string, string | number>; value: number; metricName: string };

export class HotHistogram<V extends string> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  private readonly labelName: string;
  private readonly bounds: number[];
  private readonly children = new Map<V, HotHistogramChild>();

  constructor(o: {
    name: string;
    help: string;
    labelName: string;
    values: readonly V[];
    buckets: readonly number[];
    registers: Registry[];
  }) {
    this.name = o.name;
    this.help = o.help;
    this.labelName = o.labelName;
    this.bounds = [...o.buckets].sort((a, b) => a - b);
    for (const v of o.values) this.children.set(v, new HotHistogramChild(this.bounds));
    for (const r of o.registers) r.registerMetric(this as unknown as Metric);
  }

  /** The child for one label value: take it once, observe on it per event. */
  labels(value: V): HotHistogramChild {
    const child = this.children.get(value);
    if (!child) throw new Error(`${this.name}: unknown ${this.labelName} "${value}"`);
    return child;
  }

  async get(): Promise<{ name: string; help: string; type: 'histogram'; aggregator: 'sum'; values: Value[] }> {
    const values: Value[] = [];
    for (const [label, c] of this.children) {
      let cumulative = 0;
      this.bounds.forEach((le, i) => {
        cumulative += c.counts[i];
        values.push({ labels: { le, [this.labelName]: label }, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push(
        { labels: { le: '+Inf', [this.labelName]: label }, value: c.count, metricName: `${this.name}_bucket` },
        { labels: { [this.labelName]: label }, value: c.sum, metricName: `${this.name}_sum` },
        { labels: { [this.labelName]: label }, value: c.count, metricName: `${this.name}_count` },
      );
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** registry.resetMetrics() (tests). */
  reset(): void {
    for (const c of this.children.values()) {
      c.counts.fill(0);
      c.sum = 0;
      c.count = 0;
    }
  }
}
