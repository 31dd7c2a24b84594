// The CLI client (`npm run stream`) resumes itself: the network under it drops mid-upload (a TCP
// proxy resets the connection, the bytes in flight are lost); it reconnects to the same URL, takes
// its session over and resends the file from the byte count the gateway reports. Real processes
// and sockets: the CLI as a child process → proxy → uWS gateway → emulator.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { fixture, FIXTURES } from '../support/fixtures.js';
import { startStack, type Stack } from '../support/stack.js';

const FILE = `${FIXTURES}dictation.ogg`; // 25.9 s of Ogg/Opus, 70 KB: three 32 KB frames with --fast
const audio = fixture('dictation.ogg');

/** A proxy whose first connection carries `cutAt` bytes from the client (its upgrade request
 * included), holds back the rest, and is reset on both sides once the gateway has sent a transcript:
 * the session is mid-stream and what the client sent after `cutAt` is lost in flight. Later
 * connections pass through untouched. (test/support/tcp-proxy.ts pipes whole streams: it cannot
 * stop a client's bytes part way.) */
async function cuttingProxy(
  targetPort: number,
  cutAt: number,
): Promise<{ port: number; cuts: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const state = {
    port: 0,
    cuts: 0,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
  const server = net.createServer((client) => {
    const gateway = net.connect(targetPort, '127.0.0.1');
    for (const s of [client, gateway]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => {
        sockets.delete(s);
        client.destroy();
        gateway.destroy();
      });
    }
    if (connections++ > 0) return void (client.pipe(gateway), gateway.pipe(client));
    let forwarded = 0;
    client.on('data', (d: Buffer) => {
      const room = Math.max(0, cutAt - forwarded);
      if (room > 0) gateway.write(d.subarray(0, room));
      forwarded += d.length;
    });
    gateway.on('data', (d: Buffer) => {
      client.write(d);
      if (state.cuts === 0 && d.includes('"transcript"')) {
        state.cuts++;
        client.resetAndDestroy();
        gateway.resetAndDestroy();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.port = (server.address() as net.AddressInfo).port;
  return state;
}

function runCli(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/stream.ts', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d));
  child.stderr.on('data', (d: Buffer) => (err += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 40_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    }),
  );
}

describe('npm run stream over a connection that drops', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ PACE: '20' });
  });
  afterAll(() => stack.close());

  it('reconnects, resumes from the byte count the gateway gives, and prints one whole timeline', async () => {
    // Past the first 32 KB audio frame, inside the second: the gateway holds a whole frame and part of one.
    const proxy = await cuttingProxy(stack.gateway.server.port, 40_000);
    try {
      const before = stack.emulator.sessions.length;
      const run = await runCli([
        FILE,
        '--gateway',
        `ws://127.0.0.1:${proxy.port}`,
        '--auth',
        stack.emulator.authBase,
        '--fast',
      ]);
      const shown = `exit ${run.code}\n${run.out}\n${run.err}`;
      assert.equal(proxy.cuts, 1, shown);
      assert.equal(run.code, 0, shown);
      assert.match(run.out, /reconnecting in 0\.5 s/, shown);
      const resumed = /resumed session \S+; the gateway has (\d+) of (\d+) bytes/.exec(run.out);
      assert.ok(resumed, shown);
      assert.ok(Number(resumed[1]) >= 32_000 && Number(resumed[1]) < audio.length, `resumed mid-file: ${resumed[1]}`);

      const finals = [...run.out.matchAll(/transcript final +\[([\d.]+)-([\d.]+)\]/g)].map((m) => ({
        start: Number(m[1]),
        end: Number(m[2]),
      }));
      assert.ok(finals.length > 10, shown);
      assert.equal(finals[0].start, 0, shown);
      for (let k = 1; k < finals.length; k++)
        assert.ok(Math.abs(finals[k].start - finals[k - 1].end) < 0.011, `final ${k} follows final ${k - 1}\n${shown}`);
      assert.ok(finals.at(-1)!.end > 25.5, `the finals cover the whole file\n${shown}`);
      assert.equal(run.out.match(/"type":"usage"/g)?.length, 1, shown);
      assert.equal(run.out.match(/"type":"ended"/g)?.length, 1, shown);

      const upstream = stack.emulator.sessions.slice(before);
      assert.equal(upstream.length, 1, 'one upstream session, resumed, not a new one');
      assert.ok(
        upstream[0].audio.equals(audio),
        `the upstream received the whole file once: ${upstream[0].audio.length} of ${audio.length} bytes`,
      );
    } finally {
      await proxy.close();
    }
  });
});
