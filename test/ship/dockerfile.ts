// The Dockerfile's recipe without a container engine: each stage gets a directory as its root
// filesystem, COPY copies from the build context or an earlier stage, RUN runs in the stage's
// WORKDIR with its ENV. Only what COPY copies reaches a stage, so a file the image forgets is
// missing here too. RUN lines that install Debian packages (apt-get, as root, into the base
// image) are skipped: the suite runs on the image's base (Debian 13, Node 24; scripts/runtime.sh),
// which has those packages itself.
import { spawn } from 'node:child_process';
import { cpSync, mkdirSync, statSync } from 'node:fs';
import { basename, join, posix } from 'node:path';

export interface Instruction {
  keyword: string;
  args: string;
}

export interface Stage {
  name: string;
  /** The base image FROM names. */
  from: string;
  /** This stage's "/" on the test machine. */
  root: string;
  workdir: string;
  env: Record<string, string>;
  /** Instructions recorded, not run (USER, EXPOSE, HEALTHCHECK, ENTRYPOINT, CMD, VOLUME). */
  meta: Record<string, string>;
  skipped: string[];
}

/** Instructions in order: comments and blank lines dropped, `\` continuations joined. */
export function parseDockerfile(text: string): Instruction[] {
  const logical = text.replace(/\\\r?\n/g, ' ').split(/\r?\n/);
  return logical
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const m = /^(\w+)\s+(.*)$/.exec(l);
      if (!m) throw new Error(`unparsed Dockerfile line: ${l}`);
      return { keyword: m[1].toUpperCase(), args: m[2].trim() };
    });
}

/** An exec-form (JSON array) argument; shell form is refused (signals would go to a shell). */
export function execForm(args: string | undefined, what: string): string[] {
  const parsed: unknown = JSON.parse(args ?? 'null');
  if (!Array.isArray(parsed) || !parsed.every((a) => typeof a === 'string'))
    throw new Error(`${what} is not in exec (JSON) form: ${args}`);
  return parsed;
}

const SKIPPED_RUN = /^apt-get\s/;

/** Runs the recipe under `dir` (one folder per stage) with `context` as the build context; returns the stages. */
export async function runRecipe(
  text: string,
  context: string,
  dir: string,
  log: (s: string) => void,
): Promise<Stage[]> {
  const stages: Stage[] = [];
  for (const { keyword, args } of parseDockerfile(text)) {
    if (keyword === 'FROM') {
      const name = /\sAS\s+(\S+)$/i.exec(args)?.[1] ?? String(stages.length);
      const from = args.split(/\s+/)[0];
      stages.push({
        name,
        from,
        root: join(dir, `stage-${stages.length}`),
        workdir: '/',
        env: {},
        meta: {},
        skipped: [],
      });
      mkdirSync(stages.at(-1)!.root, { recursive: true });
      continue;
    }
    const stage = stages.at(-1);
    if (!stage) throw new Error(`${keyword} before FROM`);
    const inStage = (p: string) => join(stage.root, posix.resolve(stage.workdir, p));
    if (keyword === 'WORKDIR') {
      stage.workdir = posix.resolve(stage.workdir, args);
      mkdirSync(inStage('.'), { recursive: true });
    } else if (keyword === 'ENV') {
      for (const pair of args.split(/\s+/)) {
        const m = /^(\w+)=(\S*)$/.exec(pair);
        if (!m) throw new Error(`ENV: only KEY=value pairs without spaces are emulated: ${args}`);
        stage.env[m[1]] = m[2];
      }
    } else if (keyword === 'COPY') {
      copy(args, stages, context, inStage);
    } else if (keyword === 'RUN') {
      if (SKIPPED_RUN.test(args)) stage.skipped.push(args);
      else await run(args, inStage('.'), stage.env, log);
    } else if (['USER', 'EXPOSE', 'HEALTHCHECK', 'ENTRYPOINT', 'CMD', 'VOLUME'].includes(keyword)) {
      stage.meta[keyword] = args;
    } else {
      throw new Error(`Dockerfile instruction ${keyword} is not emulated by this test`);
    }
  }
  return stages;
}

function copy(args: string, stages: Stage[], context: string, inStage: (p: string) => string): void {
  const words = args.split(/\s+/);
  const from = words[0].startsWith('--from=') ? words.shift()!.slice('--from='.length) : undefined;
  if (words.some((w) => w.startsWith('--'))) throw new Error(`COPY option not emulated: ${args}`);
  const dest = words.pop()!;
  const source = from === undefined ? context : stages.find((s) => s.name === from)?.root;
  if (!source) throw new Error(`COPY --from=${from}: no such stage`);
  const intoDir = dest.endsWith('/') || words.length > 1;
  for (const src of words) {
    const path = join(source, src);
    const target = intoDir && !statSync(path).isDirectory() ? join(inStage(dest), basename(src)) : inStage(dest);
    cpSync(path, target, { recursive: true, verbatimSymlinks: true });
  }
}

function run(command: string, cwd: string, env: Record<string, string>, log: (s: string) => void): Promise<void> {
  log(`RUN ${command}`);
  return new Promise((resolve, reject) => {
    // The image's environment: PATH to find node/npm, HOME for npm's cache and settings, the stage's ENV.
    const p = spawn('sh', ['-c', command], {
      cwd,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const keep = (c: Buffer) => (out = (out + c).slice(-8000));
    p.stdout.on('data', keep);
    p.stderr.on('data', keep);
    p.on('error', reject);
    p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`RUN ${command} exited ${code}:\n${out}`))));
  });
}

/** .dockerignore as a predicate on context-relative paths (`*`, `?`, `**`, `!` exceptions; a matched folder takes its contents). */
export function dockerignore(text: string): (path: string) => boolean {
  const rules = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const keep = l.startsWith('!');
      const glob = posix.normalize(l.slice(keep ? 1 : 0).replace(/^\/+/, ''));
      const source = glob.split(/(\*\*\/?|\*|\?)/).map((part) => {
        if (part.startsWith('**')) return '(?:.*/)?' + (part.endsWith('/') ? '' : '.*');
        if (part === '*') return '[^/]*';
        if (part === '?') return '[^/]';
        return part.replace(/[.+^${}()|[\]\\]/g, '\\$&');
      });
      return { keep, re: new RegExp(`^${source.join('')}$`) };
    });
  return (path) => {
    const parts = path.split('/');
    const prefixes = parts.map((_, i) => parts.slice(0, i + 1).join('/'));
    let ignored = false;
    for (const r of rules) if (prefixes.some((p) => r.re.test(p))) ignored = !r.keep;
    return ignored;
  };
}
