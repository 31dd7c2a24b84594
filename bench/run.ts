// `npm run bench`: runs every benchmark in bench/, one after another (they share two cores, so
// never in parallel), each printing its own table and writing bench/results/<name>.json.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
// Flags (`npm run bench -- --full`) go to every benchmark; other arguments pick benchmarks by name.
const flags = process.argv.slice(2).filter((a) => a.startsWith('--'));
const only = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const suites = readdirSync(here)
  .filter((d) => statSync(join(here, d)).isDirectory() && d !== 'results')
  .flatMap((d) =>
    readdirSync(join(here, d))
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && !f.startsWith('_'))
      .map((f) => join(d, f)),
  )
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  // The load benchmark reads the transcoding results for its targets: it runs after them.
  .sort((a, b) => Number(a.startsWith('load')) - Number(b.startsWith('load')));

let failed = 0;
for (const file of suites) {
  console.log(`\n=== ${file} ===`);
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(here, file), ...flags], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
