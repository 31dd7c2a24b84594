// What Prometheus scrapes: every gateway metric by its contract name, and bounded tenant labels.
import assert from 'node:assert/strict';
import { test } from 'vitest';
import { metrics, registry, resetTenantLabels, setMaxTenantLabels, tenantLabel } from '../../src/telemetry/index.js';

test('the registry exposes every gateway metric and the event loop lag', async () => {
  metrics.framesSplit.inc();
  const text = await registry.metrics();
  for (const name of [
    'speech_gateway_active_sessions',
    'speech_gateway_sessions_total',
    'speech_gateway_config_latency_seconds',
    'speech_gateway_upstream_connect_seconds',
    'speech_gateway_added_latency_seconds',
    'speech_gateway_audio_bytes_total',
    'speech_gateway_audio_seconds_total',
    'speech_gateway_frames_split_total',
    'speech_gateway_frames_coalesced_total',
    'speech_gateway_transcode_seconds_total',
    'speech_gateway_credits_total',
    'speech_gateway_refusals_total',
    'speech_gateway_usage_journal_depth',
    'speech_gateway_usage_journal_dropped_total',
    'speech_gateway_redis_up',
    'speech_gateway_full_access_token_refusals_total',
    'nodejs_eventloop_lag_seconds',
    'process_cpu_seconds_total',
  ]) {
    assert.match(text, new RegExp(`^# TYPE ${name} `, 'm'), name);
  }
  assert.match(text, /^speech_gateway_frames_split_total 1$/m);
});

test('tenant labels are capped: later tenants become "other"', () => {
  resetTenantLabels();
  setMaxTenantLabels(2);
  assert.equal(tenantLabel('a'), 'a');
  assert.equal(tenantLabel('b'), 'b');
  assert.equal(tenantLabel('c'), 'other');
  assert.equal(tenantLabel('a'), 'a');
  setMaxTenantLabels(50);
  resetTenantLabels();
});
