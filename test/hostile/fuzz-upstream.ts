// The upstream of test/hostile/fuzz.test.ts: the emulator in a worker thread, so it has an event
// loop of its own (a real upstream is another machine; its work must not count as the gateway's).
// Answers { id, op: 'token', scope } and { id, op: 'violations' } on its port.
import { parentPort } from 'node:worker_threads';
import { startEmulator } from '../../src/emulator/index.js';

const emulator = await startEmulator();
const port = parentPort!;
port.postMessage({ ready: true, wsBase: emulator.wsBase, authBase: emulator.authBase });
port.on('message', async (m: { id: number; op: 'token' | 'violations' | 'close'; scope?: string }) => {
  if (m.op === 'token')
    port.postMessage({ id: m.id, value: await emulator.issueToken({ tenant: 'base', scope: m.scope }) });
  if (m.op === 'violations') port.postMessage({ id: m.id, value: emulator.violations });
  if (m.op === 'close') {
    await emulator.close();
    port.postMessage({ id: m.id, value: null });
  }
});
