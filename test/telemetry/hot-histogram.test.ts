// The hand-written hot-path histogram scrapes exactly as prom-client's own histogram would with the
// same observations, and the gateway's latency histogram shows both directions.
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { Histogram, Registry } from 'prom-client';
import { HotHistogram } from '../../src/telemetry/hot-histogram.js';
import { metrics, registry } from '../../src/telemetry/index.js';

const buckets = [0.001, 0.01, 0.1, 1];
const seen = [0, 0.001, 0.0011, 0.05, 0.1, 0.7, 3, 42, 0.002];

describe('HotHistogram', () => {
  it('prints the same /metrics lines as a prom-client histogram fed the same values', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const hot = new HotHistogram({
      name: 'x_seconds',
      help: 'h',
      labelName: 'direction',
      values: ['a', 'b'],
      buckets,
      registers: [ours],
    });
    const ref = new Histogram({
      name: 'x_seconds',
      help: 'h',
      labelNames: ['direction'],
      buckets,
      registers: [theirs],
    });
    for (const v of seen) {
      hot.labels('a').observe(v);
      ref.observe({ direction: 'a' }, v);
    }
    hot.labels('b').observe(0.5);
    ref.observe({ direction: 'b' }, 0.5);
    assert.equal(await ours.metrics(), await theirs.metrics());
  });

  it('ignores a value that is not a number, refuses an unknown label value, and resets', async () => {
    const r = new Registry();
    const hot = new HotHistogram({
      name: 'y_seconds',
      help: 'h',
      labelName: 'direction',
      values: ['a'],
      buckets,
      registers: [r],
    });
    hot.labels('a').observe(Number.NaN);
    hot.labels('a').observe(0.2);
    assert.match(await r.metrics(), /^y_seconds_count\{direction="a"\} 1$/m);
    assert.throws(() => hot.labels('z' as 'a'), /unknown direction "z"/);
    r.resetMetrics();
    assert.match(await r.metrics(), /^y_seconds_bucket\{le="\+Inf",direction="a"\} 0$/m);
  });

  it('the added-latency histogram is scraped with both directions before any message', async () => {
    const text = await registry.metrics();
    assert.match(text, /^# TYPE speech_gateway_added_latency_seconds histogram$/m);
    for (const d of ['client_to_upstream', 'upstream_to_client']) {
      assert.match(
        text,
        new RegExp(`^speech_gateway_added_latency_seconds_bucket\\{le="0.0001",direction="${d}"\\} \\d+$`, 'm'),
      );
      assert.match(text, new RegExp(`^speech_gateway_added_latency_seconds_count\\{direction="${d}"\\} \\d+$`, 'm'));
    }
    metrics.forwardLatency.labels('upstream_to_client').observe(0.003);
    assert.match(
      await registry.metrics(),
      /^speech_gateway_added_latency_seconds_bucket\{le="0.005",direction="upstream_to_client"\} [1-9]\d*$/m,
    );
  });
});
