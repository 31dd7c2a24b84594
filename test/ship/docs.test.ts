// The docs the errors point to: every error id has its section in docs/errors.md under
// the anchor its `doc` link names (checked on errors a running gateway really sends too), every
// close code is explained, every alert rule has its entry in the operator's guide, and the
// relative links of the README and docs/ reach a file and a heading that exist.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { ERRORS, gatewayError, type ErrorId } from '../../src/protocol/errors.js';
import { CLOSE } from '../../src/protocol/index.js';
import { endpointPath, refusal, startStack, type Stack } from '../support/stack.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');

/** Markdown outside fenced code blocks (headings and links in code are not rendered as such). */
function prose(md: string): string {
  return md.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
}

/** GitHub's heading anchor (the rule github-slugger reproduces): lower case, every character but
 * letters, digits, `_`, `-` and space dropped (backticks too), each space one `-`. Exact for ASCII. */
function slug(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9 _-]/g, '')
    .replace(/ /g, '-');
}

/** Heading texts in order, as rendered (inline-code backticks are dropped by the slug). */
function headings(md: string): string[] {
  return [...prose(md).matchAll(/^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$/gm)].map((m) => m[1]);
}

/** The anchors GitHub gives a file's headings: a repeated slug gets -1, -2, ... */
function anchors(md: string): Set<string> {
  const seen = new Set<string>();
  for (const h of headings(md)) {
    const base = slug(h);
    let a = base;
    for (let n = 1; seen.has(a); n++) a = `${base}-${n}`;
    seen.add(a);
  }
  return seen;
}

/** Resolves a `doc` link or relative Markdown link from `fromFile` (repository-relative); why not, if broken. */
function brokenLink(fromFile: string, target: string): string | undefined {
  const [path, anchor] = target.split('#');
  const file = path ? normalize(join(dirname(fromFile), decodeURIComponent(path))) : fromFile;
  if (!existsSync(join(root, file))) return `${fromFile} → ${target}: no file ${file}`;
  if (anchor === undefined) return undefined;
  if (!file.endsWith('.md')) return `${fromFile} → ${target}: an anchor into a file that is not Markdown`;
  return anchors(read(file)).has(anchor)
    ? undefined
    : `${fromFile} → ${target}: no heading with anchor #${anchor} in ${file}`;
}

const errorsMd = read('docs/errors.md');

describe('docs/errors.md', () => {
  it('every error id has its own section under the anchor its doc link names, and no section is stale', () => {
    const ids = Object.keys(ERRORS) as ErrorId[];
    const found = anchors(errorsMd);
    for (const id of ids) {
      const doc = gatewayError(id, 'x').doc;
      assert.equal(doc, `docs/errors.md#${id.toLowerCase()}`);
      assert.ok(found.has(slug(`\`${id}\``)), `docs/errors.md has no heading \`${id}\` (anchor #${id.toLowerCase()})`);
    }
    const idHeadings = headings(errorsMd)
      .filter((h) => /^`[A-Z][A-Z_]+`$/.test(h))
      .map((h) => h.slice(1, -1));
    assert.deepEqual(
      idHeadings.filter((h) => !(h in ERRORS)),
      [],
      'sections for ids not in the catalogue',
    );
    assert.equal(
      new Set(idHeadings).size,
      idHeadings.length,
      'an id has two sections (GitHub would suffix the second anchor)',
    );
    assert.ok(
      headings(errorsMd).every((h) => /^[\x20-\x7e]+$/.test(h)),
      'headings are ASCII, so the anchor rule above is exact',
    );
  });

  it('explains every close code the gateway sends, each in one row, and no other', () => {
    const section = prose(errorsMd).split(/^## Close codes$/m)[1] ?? '';
    const rows = [...section.matchAll(/^\| (\d{4}) \|(.+)\|$/gm)];
    const documented = rows.map((r) => Number(r[1]));
    // 1009 is uWS's own close for a frame over the size limit; the rest are the session's.
    const sent = new Set<number>([...Object.values(CLOSE), 1000, 1009, 1012]);
    assert.deepEqual([...documented].sort(), [...sent].sort());
    for (const r of rows)
      assert.ok(
        r[2].split('|').every((cell) => cell.trim().length > 10),
        `close ${r[1]}: meaning and what to do`,
      );
  });
});

describe('doc links on errors a running gateway sends', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack.close());

  it('a refused upgrade, an error on the socket and a usage API error each link to their section', async () => {
    const refused = await refusal(`${stack.base}${endpointPath('transcribe')}?tenant-name=base`);
    assert.equal(refused.body.error.id, 'TOKEN_MISSING');

    const c = await stack.connect('transcribe');
    c.send('{not json');
    const onSocket = (await c.next('error')).error;
    assert.equal(onSocket.id, 'INVALID_MESSAGE');
    c.ws.close();

    const res = await fetch(`http://127.0.0.1:${stack.gateway.server.adminPort}/v1/usage`);
    const usage = (await res.json()).error;
    assert.equal(usage.id, 'UNAUTHORIZED');

    for (const e of [refused.body.error, onSocket, usage]) {
      assert.equal(brokenLink('.', e.doc), undefined);
    }
  });
});

describe('operator guide and links', () => {
  it('every alert rule in grafana/alerts.yaml has its entry in docs/operations.md, and only those', () => {
    const alerts = [...read('grafana/alerts.yaml').matchAll(/^\s*- alert:\s*(\S+)\s*$/gm)].map((m) => m[1]);
    assert.ok(alerts.length > 0, 'alert rules found');
    const guide = read('docs/operations.md');
    const found = anchors(guide);
    assert.deepEqual(
      alerts.filter((a) => !found.has(slug(a))),
      [],
      'alerts without a heading in docs/operations.md',
    );
    const described = headings(guide.split(/^## Alerts$/m)[1] ?? '');
    assert.deepEqual(
      described.filter((h) => !alerts.includes(h)),
      [],
      'entries for alerts that are not in grafana/alerts.yaml',
    );
  });

  it('every relative link in README.md and docs/*.md reaches an existing file and heading', () => {
    const files = [
      'README.md',
      ...readdirSync(join(root, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    const broken: string[] = [];
    for (const file of files) {
      const text = prose(read(file)).replace(/`[^`\n]*`/g, '');
      for (const m of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(m[1])) continue; // https:, mailto: ...
        const why = brokenLink(file, m[1]);
        if (why) broken.push(why);
      }
    }
    assert.deepEqual(broken, []);
  });
});
