// Full garbage collections from a test: what the process still holds afterwards is what it retains.
import { setTimeout as delay } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');
export const gc = runInNewContext('gc') as () => void;

/** The process's memory after three full collections a moment apart (V8 frees an ArrayBuffer's
 *  memory a moment after the collection that found it unreachable). */
export async function memoryAfterGc(): Promise<NodeJS.MemoryUsage> {
  for (let i = 0; i < 3; i++) {
    gc();
    await delay(20);
  }
  return process.memoryUsage();
}
