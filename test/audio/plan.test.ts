// Config time: which declared audioFormat values are taken, and what the upstream is told.
import { test } from 'vitest';
import assert from 'node:assert/strict';
import { planAudio } from '../../src/audio/index.js';

function ok(declared: string | undefined) {
  const r = planAudio(declared);
  assert.ok(r.ok, `${declared} should be accepted: ${!r.ok && r.reason}`);
  return r.plan;
}

function rejected(declared: string): string {
  const r = planAudio(declared);
  assert.ok(!r.ok, `${declared} should be rejected`);
  return r.reason;
}

test('upstream formats pass through with the declared value', () => {
  for (const d of [
    'audio/ogg',
    'audio/ogg;codecs=opus',
    'audio/ogg; codecs="vorbis"',
    'audio/webm;codecs=opus',
    'audio/webm',
    'audio/opus',
    'audio/vorbis',
    'audio/mpeg',
    'audio/mp3',
    'audio/mpeg3',
    'audio/flac',
    'audio/m4a;codecs=mp4a.40.2',
    'audio/mp4;codecs=mp3',
  ]) {
    const p = ok(d);
    assert.equal(p.mode, 'passthrough', d);
    assert.equal(p.upstreamAudioFormat, d);
  }
});

test('formats the gateway transcodes go upstream as Ogg/Opus', () => {
  for (const d of [
    'audio/wav',
    'audio/wave',
    'audio/x-wav',
    'audio/webm;codecs=pcm',
    'audio/mp4;codecs=opus',
    'audio/pcm;rate=16000;channels=1',
    'audio/L16;rate=8000;channels=2',
  ]) {
    const p = ok(d);
    assert.equal(p.mode, 'transcode', d);
    assert.equal(p.upstreamAudioFormat, 'audio/ogg;codecs=opus');
  }
  assert.deepEqual(ok('audio/pcm;rate=48000;channels=2;encoding=f32le').pcm, {
    sampleRate: 48000,
    channels: 2,
    encoding: 'f32le',
  });
  assert.deepEqual(ok('audio/pcm;rate=16000').pcm, { sampleRate: 16000, channels: 1, encoding: 's16le' });
  assert.deepEqual(ok('audio/L16;rate=16000;channels=1').pcm, { sampleRate: 16000, channels: 1, encoding: 's16be' });
});

test('undeclared and plain audio/mp4 are decided from the bytes', () => {
  assert.deepEqual(ok(undefined), { mode: 'detect' });
  const mp4 = ok('audio/mp4');
  assert.equal(mp4.mode, 'detect');
  assert.equal(mp4.upstreamAudioFormat, undefined);
});

test('unsupported declarations give a reason', () => {
  assert.match(rejected('audio/aac'), /unsupported audioFormat audio\/aac/);
  assert.match(rejected('video/webm;codecs=vp8'), /unsupported/);
  assert.match(rejected('audio/ogg;codecs=flac'), /cannot carry/);
  assert.match(rejected('audio/pcm;channels=1'), /rate=R/);
  assert.match(rejected('audio/pcm;rate=16000;channels=6'), /channels/);
  assert.match(rejected('audio/pcm;rate=16000;encoding=s24le'), /encoding/);
  assert.match(rejected('not a mime'), /not a MIME type/);
  assert.match(rejected('audio / ogg'), /not a MIME type/); // passed through, the upstream would refuse it
});
