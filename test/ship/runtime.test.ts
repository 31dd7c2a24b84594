// The suite runs on the runtime production runs: the Node line `engines` names, the pinned
// uWebSockets.js build with its native binary for this Node loaded (not some other build, not a
// fallback), the Opus addon built for this Node, and a C library the uWS binary can load.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, it } from 'vitest';
import { isNativeUws } from '../../src/server/index.js';

const require = createRequire(import.meta.url);
const root = new URL('../../', import.meta.url);
const json = (path: string) => JSON.parse(readFileSync(new URL(path, root), 'utf8'));
const pkg = json('package.json');
const lock = json('package-lock.json');
const loaded = (): string[] => (process.report.getReport() as { sharedObjects: string[] }).sharedObjects;

describe('the runtime the tests run on', () => {
  it('is the Node LTS line engines names (Node 24), on glibc 2.38 or newer', () => {
    assert.equal(pkg.engines.node, '^24.0.0');
    assert.equal(process.versions.node.split('.')[0], '24', `tests run on ${process.version}`);
    const glibc =
      (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header.glibcVersionRuntime ?? '';
    const [major, minor] = glibc.split('.').map(Number);
    assert.ok(major > 2 || (major === 2 && minor >= 38), `glibc ${glibc || 'unknown'}`);
  });

  it('loads the pinned uWebSockets.js build, its native binary for this Node', () => {
    assert.equal(pkg.dependencies['uWebSockets.js'], 'npm:@btc-vision/uwebsockets.js@20.57.0');
    const locked = lock.packages['node_modules/uWebSockets.js'];
    assert.equal(locked.version, '20.57.0');
    assert.match(locked.integrity, /^sha512-/);
    const installed = json('node_modules/uWebSockets.js/package.json');
    assert.deepEqual([installed.name, installed.version], ['@btc-vision/uwebsockets.js', '20.57.0']);
    require('uWebSockets.js');
    const binary = `/node_modules/uWebSockets.js/uws_linux_x64_${process.versions.modules}.node`;
    assert.ok(
      loaded().some((p) => p.endsWith(binary)),
      `${binary} not loaded; loaded: ${
        loaded()
          .filter((p) => p.includes('uws'))
          .join(', ') || 'none'
      }`,
    );
    assert.equal(isNativeUws(), true);
  });

  it('loads the Opus addon built for this Node', () => {
    const { OpusEncoder } = require('@discordjs/opus') as {
      OpusEncoder: new (rate: number, channels: number) => { encode(pcm: Buffer): Buffer };
    };
    assert.ok(new OpusEncoder(16_000, 1).encode(Buffer.alloc(640)).length > 0);
    const addon = loaded().find((p) => p.includes('/@discordjs/opus/'));
    assert.match(addon ?? '', new RegExp(`/node-v${process.versions.modules}-`), `Opus addon: ${addon}`);
  });
});
