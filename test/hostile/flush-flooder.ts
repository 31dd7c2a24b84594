// The attacker of test/hostile/flush-flood.test.ts, in a process of its own (an attacker is another
// machine: its flood reaches the gateway as fast as the kernel carries it, not at the pace of the
// gateway's own event loop, and tallying the answers is not the gateway's work). Configures, waits
// for a line on stdin, sends about 4 s of Ogg audio, then FLOOD_FLUSHES `{"type":"flush"}` frames and
// an `end` in one write. Tallies what it is told (a million answers are not kept) and prints JSON
// lines on stdout: {"sessionId"}, {"sent"}, then the tally once `ended` came (or the socket closed).
//   FLOOD_URL=ws://127.0.0.1:PORT/audio-bridge/v2/transcribe?... FLOOD_FLUSHES=n node --import tsx test/hostile/flush-flooder.ts
import { createInterface } from 'node:readline';
import { fixture } from '../support/fixtures.js';
import { openRawSocketAt, textFrames } from '../support/raw-client.js';

export interface Tally {
  sessionId?: string;
  flushed: number;
  refusals: number;
  credits: number;
  usage?: number;
  /** every `flushed` followed by its `delta_usage`, all before `usage` then `ended` */
  inOrder: boolean;
  last?: string;
  /** ms from the flood's write to `ended` */
  endMs?: number;
  /** the close, when the socket closed before `ended` */
  closed?: number;
}

const OGG_CONFIG = { primaryLanguage: 'en', audioFormat: 'audio/ogg' };
const TYPE = /"type"\s*:\s*"(\w+)"/;
const ZERO_DELTA = Buffer.from('{"type":"delta_usage","credits":0}');

/** About `seconds` of the ~26 s fixture, cut at an Ogg page boundary. */
function oggSeconds(seconds: number): Buffer {
  const ogg = fixture('dictation.ogg');
  return ogg.subarray(0, ogg.indexOf('OggS', Math.round((ogg.length * seconds) / 26)));
}

function tally(t: Tally, data: Buffer): void {
  const type = TYPE.exec(data.toString('latin1', 0, 48))?.[1] ?? JSON.parse(data.toString()).type;
  if (type === 'transcript') return;
  if (type === 'CONFIG_ACCEPTED') t.sessionId = JSON.parse(data.toString()).sessionId;
  if (type === 'error' && JSON.parse(data.toString()).error.id === 'TOO_MANY_FLUSHES') return void t.refusals++;
  const before = t.last;
  t.last = type;
  if (type === 'flushed') {
    t.flushed++;
    if (before === 'flushed' || t.usage !== undefined) t.inOrder = false;
  } else if (type === 'delta_usage') {
    if (before !== 'flushed') t.inOrder = false;
    if (!data.equals(ZERO_DELTA)) t.credits += JSON.parse(data.toString()).credits;
  } else if (type === 'usage') {
    if (before === 'flushed') t.inOrder = false;
    t.usage = JSON.parse(data.toString()).credits;
  } else if (type === 'ended') {
    if (before !== 'usage') t.inOrder = false;
  } else if (type !== 'CONFIG_ACCEPTED') t.inOrder = false;
}

const say = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);

async function main(): Promise<void> {
  const flushes = Number(process.env.FLOOD_FLUSHES);
  const { ws, write } = await openRawSocketAt(process.env.FLOOD_URL ?? '');
  const t: Tally = { flushed: 0, refusals: 0, credits: 0, inOrder: true };
  let sent = 0;
  const done = (closed?: number) => {
    say({ ...t, closed, endMs: closed === undefined ? performance.now() - sent : undefined });
    process.exit(0);
  };
  ws.on('message', (data: Buffer) => {
    const configured = t.sessionId;
    tally(t, data);
    if (!configured && t.sessionId) say({ sessionId: t.sessionId });
    if (t.last === 'ended') done();
  });
  ws.on('close', (code) => done(code));
  ws.send(JSON.stringify({ type: 'config', configuration: OGG_CONFIG }));
  const flood = Buffer.concat([textFrames('{"type":"flush"}', flushes), textFrames('{"type":"end"}', 1)]);
  for await (const _ of createInterface({ input: process.stdin })) break;
  ws.send(oggSeconds(4));
  await new Promise((r) => setTimeout(r, 100));
  sent = performance.now();
  write(flood);
  say({ sent: flood.length });
}

await main();
