import { test } from 'vitest';
import assert from 'node:assert/strict';
import { isUpstreamAudioFormat, parseAudioFormat } from '../../src/protocol/index.js';

test('parseAudioFormat lower-cases, trims and unquotes', () => {
  assert.deepEqual(parseAudioFormat(' Audio/WebM ; Codecs="OPUS" '), {
    type: 'audio',
    subtype: 'webm',
    params: { codecs: 'opus' },
  });
  assert.deepEqual(parseAudioFormat('audio/pcm;rate=16000;channels=1'), {
    type: 'audio',
    subtype: 'pcm',
    params: { rate: '16000', channels: '1' },
  });
  assert.deepEqual(parseAudioFormat('audio/ogg;'), { type: 'audio', subtype: 'ogg', params: {} });
});

test('parseAudioFormat returns null for malformed types', () => {
  for (const bad of [
    '',
    'audio',
    'audio/',
    '/webm',
    'audio/we bm',
    'audio/webm;codecs',
    'audio/webm;codecs=',
    'audio/webm;=opus',
    'audio / webm',
    'audio/ webm',
  ]) {
    assert.equal(parseAudioFormat(bad), null, bad);
  }
});

test('every audio format the upstream accepts is accepted, case-insensitively', () => {
  const ok = [
    'audio/ogg',
    'audio/webm',
    'audio/opus',
    'audio/vorbis',
    'audio/mpeg',
    'audio/mp3',
    'audio/mpeg3',
    'audio/flac',
    'audio/mp4',
    'audio/m4a',
    'AUDIO/OGG',
    'audio/webm;codecs=opus',
    'audio/webm; codecs="vorbis"',
    'audio/ogg;codecs=opus',
    'audio/ogg;codecs=Vorbis',
  ];
  for (const m of ok) assert.equal(isUpstreamAudioFormat(m), true, m);
});

test('formats the upstream does not take are refused', () => {
  const no = [
    'audio/wav',
    'audio/x-wav',
    'audio/pcm;rate=16000;channels=1',
    'audio/L16;rate=16000;channels=1',
    'video/webm',
    'audio/webm;codecs=pcm',
    'audio/mp4;codecs=opus', // Chromium's fragmented MP4 with Opus
    'audio/webm;codecs=opus;rate=48000',
    'audio/mpeg;codecs=opus',
    'audio/opus;codecs=vorbis',
    'nonsense',
    '',
  ];
  for (const m of no) assert.equal(isUpstreamAudioFormat(m), false, m);
});
