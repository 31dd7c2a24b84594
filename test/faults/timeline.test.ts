// One timeline across upstream sessions: after a reconnect the new session's times are shifted by
// the replay offset, and the finals (and commands) the client already has are not sent twice.
// Messages come from the emulator's own builders, in the upstream's exact shapes.
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { commandMessage, factsMessage, streamsTranscript, transcribeTranscript } from '../../src/emulator/messages.js';
import { createTimeline, upstreamMessageType, type Timeline } from '../../src/protocol/index.js';

const bytes = (msg: unknown) => Buffer.from(JSON.stringify(msg));
/** What the client receives for one upstream message: parsed, or undefined when it is not sent. */
function deliver(t: Timeline, msg: unknown): any {
  const data = bytes(msg);
  const out = t.map(upstreamMessageType(data) ?? '', data);
  return out && JSON.parse(out.toString());
}
const final = (start: number, end: number) => transcribeTranscript(0, start, end, true);
const interim = (start: number, end: number) => transcribeTranscript(0, start, end, false);
/** A /streams segment on a channel, final or not. */
function segment(start: number, end: number, channel = 0, isFinal = true) {
  const [s] = streamsTranscript(0, start, end, true).data;
  return { ...s, final: isFinal, participant: { channel } };
}
const segments = (...data: unknown[]) => ({ type: 'transcript', data });

describe('/transcribe timeline', () => {
  it('at offset 0 relays the very same Buffer for every message type', () => {
    const t = createTimeline('transcribe');
    for (const msg of [
      interim(0, 0.5),
      final(0, 1),
      commandMessage('next', 'next field', 0, 1),
      { type: 'delta_usage', credits: 0.1 },
      { type: 'flushed' },
    ]) {
      const data = bytes(msg);
      assert.equal(t.map(msg.type, data), data, msg.type);
    }
    assert.equal(t.finalUntil, 1);
  });

  it('parses only the finals before any replay, then every transcript once', () => {
    const t = createTimeline('transcribe');
    const parse = JSON.parse;
    let parses = 0;
    JSON.parse = (text: string, reviver?: (k: string, v: unknown) => unknown) => (parses++, parse(text, reviver));
    try {
      for (let s = 0; s < 3; s++) {
        for (const msg of [interim(s, s + 0.3), interim(s, s + 0.6), final(s, s + 1)]) {
          const data = bytes(msg);
          assert.equal(t.map('transcript', data), data);
        }
      }
      assert.equal(parses, 3, 'one parse per final, none for an interim');
      assert.equal(t.finalUntil, 3);
      t.offset = 2.5;
      assert.equal(
        t.map('transcript', bytes(interim(0, 0.4))),
        undefined,
        'after a replay an interim may repeat: read',
      );
      const moved = t.map('transcript', bytes(interim(0.5, 1)));
      assert.equal(parses, 3 + 2, 'after a replay: each transcript once');
      assert.equal(parse(moved!.toString()).data.end, 3.5);
    } finally {
      JSON.parse = parse;
    }
  });

  it('shifts every start and end by the offset, leaving the rest as it came', () => {
    const t = createTimeline('transcribe');
    t.offset = 2.1;
    const msg = final(0.2, 1.3);
    assert.deepEqual(deliver(t, msg), { ...msg, data: { ...msg.data, start: 2.3, end: 3.4 } });
    assert.equal(t.finalUntil, 3.4);
    const cmd = commandMessage('next', 'next field', 1.3, 1.9);
    assert.deepEqual(deliver(t, cmd), { ...cmd, data: { ...cmd.data, start: 3.4, end: 4 } });
  });

  it('after a reconnect drops the finals and interims the client already has, on one increasing timeline', () => {
    const t = createTimeline('transcribe');
    const seen: Array<[number, number]> = [];
    const client = (msg: unknown) => {
      const got = deliver(t, msg);
      if (got?.data.isFinal) seen.push([got.data.start, got.data.end]);
      return got;
    };
    for (let s = 0; s < 7; s++) client(final(s, s + 1));
    assert.equal(t.finalUntil, 7);
    // The upstream dies at 7.4 s; the replay starts at the container boundary at 6.5 s.
    t.offset = 6.5;
    assert.equal(client(interim(0, 0.3)), undefined);
    assert.equal(client(final(0, 0.5)), undefined, 'the span 6.5-7.0 is already with the client');
    assert.equal(client(final(0, 0.508)), undefined, 'a repeat whose end the upstream rounded differently');
    assert.deepEqual(client(interim(0.5, 1)).data.end, 7.5);
    for (let s = 0.5; s < 3; s++) client(final(s, s + 1));
    assert.deepEqual(seen, [
      [0, 1],
      [1, 2],
      [2, 3],
      [3, 4],
      [4, 5],
      [5, 6],
      [6, 7],
      [7, 8],
      [8, 9],
      [9, 10],
    ]);
    assert.equal(t.finalUntil, 10);
  });

  it('sends each command once: the same span in the same session passes, a replayed one does not', () => {
    const t = createTimeline('transcribe');
    deliver(t, final(3, 5));
    assert.ok(
      deliver(t, commandMessage('next', 'next field', 3, 5)),
      'the emulator sends a command after its final, same span',
    );
    t.offset = 4;
    deliver(t, final(0, 1));
    assert.equal(
      deliver(t, commandMessage('next', 'next field', -1, 1)),
      undefined,
      'recognised again in the replayed audio',
    );
    assert.deepEqual(deliver(t, commandMessage('undo', 'undo that', 2, 2.5)).data, {
      id: 'undo',
      variables: {},
      rawTranscriptText: 'undo that',
      start: 6,
      end: 6.5,
    });
  });
});

describe('/streams timeline', () => {
  it('at offset 0 relays the very same Buffer; facts keep their wall-clock times at any offset', () => {
    const t = createTimeline('streams');
    const data = bytes(segments(segment(0, 1), segment(1, 2)));
    assert.equal(t.map('transcript', data), data);
    t.offset = 30;
    const facts = bytes(factsMessage(1, 2, Date.UTC(2026, 0, 1)));
    assert.equal(t.map('facts', facts), facts);
  });

  it('keeps the new segments of a message that also repeats old ones, shifted', () => {
    const t = createTimeline('streams');
    deliver(t, segments(segment(0, 2), segment(2, 4)));
    t.offset = 3;
    const out = deliver(t, segments(segment(0, 1), segment(1, 2), segment(2, 2.5, 0, false)));
    assert.deepEqual(
      out.data.map((s: any) => [s.time.start, s.time.end, s.final]),
      [
        [4, 5, true],
        [5, 5.5, false],
      ],
    );
    assert.equal(deliver(t, segments(segment(0, 0.5), segment(0.5, 1))), undefined, 'nothing new: nothing sent');
    assert.equal(t.finalUntil, 5);
  });

  it('judges each channel on its own: a later final of another channel may end earlier', () => {
    const t = createTimeline('streams');
    deliver(t, segments(segment(0, 6, 0)));
    assert.ok(deliver(t, segments(segment(3, 5, 1))), 'channel 1 spoke while channel 0 did');
    assert.equal(t.finalUntil, 5, 'no channel has finals missing before this point');
    t.offset = 4;
    const out = deliver(t, segments(segment(0, 1, 1), segment(0, 1.5, 1), segment(0, 2, 0), segment(0, 2.5, 0)));
    assert.deepEqual(
      out.data.map((s: any) => [s.participant.channel, s.time.end]),
      [
        [1, 5.5],
        [0, 6.5],
      ],
    );
    assert.equal(t.finalUntil, 5.5);
  });
});

describe('odd upstream messages', () => {
  it('pass unchanged and never throw', () => {
    for (const endpoint of ['transcribe', 'streams'] as const) {
      const t = createTimeline(endpoint);
      t.offset = 5;
      const odd = [
        '{"type":"transcript","data":', // truncated
        '{"type":"transcript","data":"hello"}',
        '{"type":"transcript","data":null}',
        `{"type":"transcript","data":${'['.repeat(100_000)}${']'.repeat(100_000)}}`,
        '{"type":"command"}',
        'not json',
      ];
      for (const text of odd) {
        const data = Buffer.from(text);
        assert.equal(t.map(upstreamMessageType(data) ?? 'transcript', data), data, `${endpoint}: ${text.slice(0, 40)}`);
      }
      assert.equal(t.finalUntil, 0);
    }
  });

  it('shift only the times that are numbers and keep segments they cannot read', () => {
    const t = createTimeline('streams');
    t.offset = 1;
    const out = deliver(
      t,
      segments(7, null, { final: true, time: { start: 'x', end: 2 } }, { final: true, time: { start: 0, end: 'y' } }),
    );
    assert.deepEqual(out.data, [
      7,
      null,
      { final: true, time: { start: 'x', end: 3 } },
      { final: true, time: { start: 1, end: 'y' } },
    ]);
    const tr = createTimeline('transcribe');
    tr.offset = 1;
    assert.deepEqual(deliver(tr, { type: 'transcript', data: { text: 'a', start: null, isFinal: true } }).data, {
      text: 'a',
      start: null,
      isFinal: true,
    });
    assert.equal(tr.finalUntil, 0);
  });

  it('a hostile channel number shares one watermark instead of growing state', () => {
    const t = createTimeline('streams');
    deliver(t, segments(segment(0, 4, 1e9), segment(0, 4, -1)));
    assert.equal(deliver(t, segments(segment(1, 3, 2 ** 40))), undefined);
    assert.ok(deliver(t, segments(segment(1, 3, 31))), 'channels 0-31 each have their own');
  });

  it('an offset that is not a time is refused at once', () => {
    const t = createTimeline('transcribe');
    for (const bad of [Number.NaN, -1, Number.POSITIVE_INFINITY]) assert.throws(() => (t.offset = bad), RangeError);
    assert.equal(t.offset, 0);
  });
});
