// A fresh gateway's /metrics already has the counters that dashboards and alerts read, at 0 for
// every known label value: a series that appears only at its first event has no rate() and no
// increase() for that event, so an alert would see nothing rather than 0, then miss the first one.
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { REFUSAL_REASONS } from '../../src/auth/index.js';
import { startStack, type Stack } from '../support/stack.js';

describe('counters a fresh gateway exposes at 0', () => {
  let stack: Stack;
  let text: string;
  beforeAll(async () => {
    stack = await startStack();
    text = await (await fetch(`http://127.0.0.1:${stack.gateway.server.adminPort}/metrics`)).text();
  });
  afterAll(() => stack?.close());

  const expect0 = (series: string) =>
    assert.match(text, new RegExp(`^${series.replace(/[{}]/g, '\\$&')} 0$`, 'm'), `${series} 0`);

  it('refusals, for every reason the gateway refuses with', () => {
    const reasons = [
      ...REFUSAL_REASONS,
      'not_found',
      'draining',
      'tenant_limit',
      'unconfigured_limit',
      'bad_interaction_id',
      'bad_resume_key',
      'resume_refused',
      'resume_unavailable',
      'resume_key_in_use',
      'hop_forbidden',
      'hop_not_owner',
    ];
    for (const reason of reasons) expect0(`speech_gateway_refusals_total{reason="${reason}"}`);
  });

  it('upstream failures, reconnects and their results', () => {
    for (const cause of ['closed', 'error', 'timeout', 'dead'])
      expect0(`speech_gateway_upstream_failures_total{cause="${cause}"}`);
    for (const cause of ['upstream_closed', 'upstream_unavailable', 'upstream_timeout']) {
      expect0(`speech_gateway_upstream_reconnects_total{cause="${cause}"}`);
    }
    for (const result of ['ok', 'failed'])
      expect0(`speech_gateway_upstream_reconnect_results_total{result="${result}"}`);
  });

  it('refused credit figures', () => {
    for (const reason of ['out_of_range', 'unreadable', 'overflow'])
      expect0(`speech_gateway_usage_refused_total{reason="${reason}"}`);
  });

  it('audit write failures', () => {
    for (const sink of ['log', 'store']) expect0(`speech_gateway_audit_write_failures_total{sink="${sink}"}`);
  });
});
