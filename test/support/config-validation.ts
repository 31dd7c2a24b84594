// Test support: the gateway's config validation (validateConfig), called as a unit.
import assert from 'node:assert/strict';
import { validateConfig, type Endpoint } from '../../src/protocol/index.js';

/** The configuration, shown in a failure message: at most 300 characters of its JSON (the bounds
 *  tests pass configurations nested a million levels deep or with 10 MB strings). */
function shown(configuration: unknown): string {
  try {
    return String(JSON.stringify(configuration)).slice(0, 300);
  } catch {
    return 'a configuration JSON.stringify cannot write';
  }
}

/** Asserts `configuration` is denied on `endpoint` (not refused otherwise); returns the reason. */
export function denied(endpoint: Endpoint, configuration: unknown): string {
  const r = validateConfig(endpoint, configuration);
  if (r.ok) assert.fail(`expected a denial for ${shown(configuration)}`);
  assert.equal(r.status, 'denied', r.reason);
  return r.reason;
}

/** Asserts `configuration` is accepted on `endpoint`; returns the config as the gateway keeps it. */
export function accepted(endpoint: Endpoint, configuration: unknown) {
  const r = validateConfig(endpoint, configuration);
  if (!r.ok) assert.fail(r.reason);
  return r.config;
}
