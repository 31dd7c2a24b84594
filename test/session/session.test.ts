// Session on its own: a fake clock, a fake upstream link, a fake ledger, limiter and client socket.
// What a client and the ledger would notice of the shell's work (timers feeding the machine, effects
// performed, usage relayed and recorded), without a socket, an emulator or a real second.
import assert from 'node:assert/strict';
import pino from 'pino';
import { describe, it } from 'vitest';
import type { LinkOptions } from '../../src/session/upstream-link.js';
import { Session, type ClientSink } from '../../src/session/index.js';
import type { Link, SessionDeps } from '../../src/session/index.js';
import type { Clock } from '../../src/session/timers.js';

class FakeClock implements Clock {
  private t = 0;
  private timers = new Map<number, { at: number; fn: () => void }>();
  private next = 1;
  now = () => this.t;
  setTimeout = (fn: () => void, ms: number) => (this.timers.set(this.next, { at: this.t + ms, fn }), this.next++);
  clearTimeout = (h: unknown) => void this.timers.delete(h as number);
  /** Moves time on, firing what falls due in order. */
  advance(ms: number): void {
    const until = this.t + ms;
    for (;;) {
      const due = [...this.timers.entries()].filter(([, x]) => x.at <= until).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.timers.delete(due[0]);
      this.t = due[1].at;
      due[1].fn();
    }
    this.t = until;
  }
}

class FakeSink implements ClientSink {
  sent: string[] = [];
  closed?: { code: number; reason: string };
  sendText(text: string | Buffer): boolean {
    this.sent.push(text.toString());
    return true;
  }
  backlog = () => 0;
  close(code: number, reason: string): void {
    this.closed ??= { code, reason };
  }
  undelivered = () => [];
  types = () => this.sent.map((m) => JSON.parse(m).type as string);
}

/** The upstream side as the session sees it: the test plays the service through `o.handlers`. */
class FakeLink implements Link {
  opened?: unknown;
  controls: string[] = [];
  audio: Buffer[] = [];
  closed = false;
  segment = 0;
  offset = 0;
  finalUntil = 0;
  constructor(readonly o: LinkOptions) {}
  open(config: unknown): void {
    this.opened = config;
  }
  restore(): void {}
  resumePoint = () => undefined;
  replayBytes = 0;
  unit = <U>(u: U) => u;
  sendAudio(frame: Buffer): boolean {
    this.audio.push(frame);
    return true;
  }
  sendControl(m: { type: string }): void {
    this.controls.push(m.type);
  }
  reconnect(): void {}
  openRestored(): void {}
  stalls = 0;
  stalled(): void {
    this.stalls++;
  }
  close(): void {
    this.closed = true;
  }
  /** The service answers with `message`. */
  says(message: object): void {
    const data = Buffer.from(JSON.stringify(message));
    const type = (message as { type: string }).type;
    if (type === 'CONFIG_ACCEPTED') return this.o.handlers.onReady(data, false);
    this.o.handlers.onMessage(type, data, performance.now());
  }
}

function fakeSession() {
  const clock = new FakeClock();
  const sink = new FakeSink();
  const links: FakeLink[] = [];
  const ledger = {
    started: [] as string[],
    ended: [] as Array<{ outcome: string }>,
    usage: [] as Array<{ kind: string; credits: number }>,
  };
  const slots = { taken: 0, released: 0 };
  const deps: SessionDeps = {
    settings: {
      upstreamWsBase: 'ws://unused',
      configTimeoutMs: 10_000,
      streamMaxSeconds: 7200,
      chunkMs: 250,
      pace: 1,
      maxBufferedAudioBytes: 1 << 20,
      endTimeoutMs: 30_000,
      reconnect: { attempts: 0, maxSeconds: 1, replayBytes: 1 << 20 },
      resumeGraceSeconds: 30,
    },
    credentials: { tokenFor: async () => 'token' } as unknown as SessionDeps['credentials'],
    ledger: {
      sessionStarted: (s: { sessionKey: string }) => void ledger.started.push(s.sessionKey),
      setUpstreamSessionId: () => undefined,
      recordUsage: (e: { kind: string; credits: number }) => (ledger.usage.push(e), Number.isFinite(e.credits)),
      sessionEnded: (e: { outcome: string }) => void ledger.ended.push(e),
    } as unknown as SessionDeps['ledger'],
    limiter: {
      acquire: async () => (slots.taken++, true),
      release: async () => void slots.released++,
    } as unknown as SessionDeps['limiter'],
    logger: pino({ level: 'silent' }),
    clock,
    createLink: (o) => {
      const l = new FakeLink(o);
      links.push(l);
      return l;
    },
  };
  const session = new Session(
    deps,
    { sessionKey: 'k1', endpoint: 'transcribe', tenant: 't', environment: 'eu', clientToken: 'c' },
    sink,
  );
  let finished = false;
  session.on((e) => e.type === 'finished' && (finished = true));
  const text = (m: object) => {
    const b = Buffer.from(JSON.stringify(m));
    session.onClientText(b.buffer.slice(b.byteOffset, b.byteOffset + b.length) as ArrayBuffer);
  };
  return { clock, sink, links, ledger, slots, session, text, finished: () => finished };
}

const settle = () => new Promise((r) => setImmediate(r));

describe('Session with a fake clock and fake collaborators', () => {
  it('no config within the deadline: CONFIG_TIMEOUT and 4008 when the clock says so, nothing billed, no upstream', () => {
    const f = fakeSession();
    f.clock.advance(9_999);
    assert.deepEqual(f.sink.sent, []);
    f.clock.advance(1);
    assert.deepEqual(f.sink.types(), ['CONFIG_TIMEOUT']);
    assert.equal(f.sink.closed?.code, 4008);
    assert.equal(f.links.length, 0);
    assert.deepEqual(f.ledger.started, []);
    assert.ok(f.finished());
  });

  it('a session through: config → slot → upstream config; CONFIG_ACCEPTED relayed and billed from then; end → usage and ended relayed; ledger ended, slot released', async () => {
    const f = fakeSession();
    f.text({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg' } });
    await settle(); // the slot is asked for asynchronously
    assert.equal(f.slots.taken, 1);
    const link = f.links[0];
    // The upstream is asked for interim results (the stall watch's evidence); the client gets none.
    assert.deepEqual(link.opened, { primaryLanguage: 'en', audioFormat: 'audio/ogg', interimResults: true });
    f.clock.advance(9_999); // the client's config deadline no longer applies; the upstream has 10 s to answer
    link.says({ type: 'CONFIG_ACCEPTED', sessionId: 'up-1' });
    assert.deepEqual(f.sink.types(), ['CONFIG_ACCEPTED']);
    assert.deepEqual(f.ledger.started, ['k1']);
    f.text({ type: 'end' });
    await settle();
    assert.deepEqual(link.controls, ['end']);
    link.says({ type: 'usage', credits: 1.5 });
    link.says({ type: 'ended' });
    assert.deepEqual(f.sink.types(), ['CONFIG_ACCEPTED', 'usage', 'ended']);
    assert.equal(JSON.parse(f.sink.sent[1]).credits, 1.5);
    assert.equal(f.sink.closed?.code, 1000);
    assert.deepEqual(
      f.ledger.ended.map((e) => e.outcome),
      ['ended'],
    );
    await settle();
    assert.equal(f.slots.released, 1);
    assert.ok(f.finished());
  });

  it('the lifecycle stream tells a whole session in order: opened, configured, accepted, live, its upstream segment, usage, ended, finished', async () => {
    const f = fakeSession();
    const heard: string[] = [];
    f.session.on((e) => heard.push(e.type === 'usage' ? `usage:${e.kind}:${e.credits}:${e.recorded}` : e.type));
    f.text({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg' } });
    await settle();
    f.links[0].says({ type: 'CONFIG_ACCEPTED', sessionId: 'up-1' });
    f.links[0].says({ type: 'delta_usage', credits: 0.5 });
    f.links[0].says({ type: 'delta_usage', credits: 'lots' });
    f.text({ type: 'end' });
    await settle();
    f.links[0].says({ type: 'usage', credits: 1.5 });
    f.links[0].says({ type: 'ended' });
    assert.deepEqual(heard, [
      'configured',
      'config_accepted',
      'live',
      'upstream_segment',
      'usage:delta:0.5:true',
      'usage:delta:NaN:false',
      'usage:final:1.5:true',
      'ended',
      'finished',
    ]);
  });

  it('a config refused is told as refused (config_denied), then ended; nothing opens upstream', () => {
    const f = fakeSession();
    const heard: string[] = [];
    f.session.on((e) => heard.push(e.type === 'refused' ? `refused:${e.reason}` : e.type));
    f.text({ type: 'config', configuration: { primaryLanguage: 42 } });
    assert.deepEqual(heard, ['refused:config_denied', 'ended', 'finished']);
    assert.equal(f.links.length, 0);
  });

  it('an upstream that never answers `end`: UPSTREAM_TIMEOUT after END_TIMEOUT_MS of the fake clock, 1014, the ledger says upstream_timeout', async () => {
    const f = fakeSession();
    f.text({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg' } });
    await settle();
    f.links[0].says({ type: 'CONFIG_ACCEPTED', sessionId: 'up-1' });
    f.text({ type: 'end' });
    await settle();
    f.clock.advance(29_999);
    assert.ok(!f.finished());
    f.clock.advance(1);
    assert.equal(JSON.parse(f.sink.sent.at(-1)!).error.id, 'UPSTREAM_TIMEOUT');
    assert.equal(f.sink.closed?.code, 1014);
    assert.deepEqual(
      f.ledger.ended.map((e) => e.outcome),
      ['upstream_timeout'],
    );
    assert.equal(f.session.usageEstimated, true);
  });

  it('an upstream that does not answer the config in time: UPSTREAM_TIMEOUT, 1014, nothing billed', async () => {
    const f = fakeSession();
    f.text({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg' } });
    await settle();
    f.clock.advance(10_000);
    assert.equal(JSON.parse(f.sink.sent.at(-1)!).error.id, 'UPSTREAM_TIMEOUT');
    assert.equal(f.sink.closed?.code, 1014);
    assert.deepEqual(f.ledger.started, []);
    assert.ok(f.links[0].closed);
  });

  it('a usage figure the ledger refuses reaches the client as one it holds (0 for a delta), never as sent', async () => {
    const f = fakeSession();
    f.text({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg' } });
    await settle();
    f.links[0].says({ type: 'CONFIG_ACCEPTED', sessionId: 'up-1' });
    f.links[0].says({ type: 'delta_usage', credits: 'lots' });
    const told = JSON.parse(f.sink.sent.at(-1)!);
    assert.deepEqual([told.type, told.credits], ['delta_usage', 0]);
  });

  it('a handover asked of a session with no stream another replica could go on with: refused, the client stays', async () => {
    const f = fakeSession();
    f.text({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg' } });
    await settle();
    f.links[0].says({ type: 'CONFIG_ACCEPTED', sessionId: 'up-1' });
    assert.equal(
      await f.session.handOver(),
      undefined,
      'no audio yet: nothing another replica could go on with; it drains here',
    );
    assert.equal(f.sink.closed, undefined);
  });
});
