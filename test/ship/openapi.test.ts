// The usage API's contract, openapi/usage.yaml: clean under Redocly's linter (rules in
// redocly.yaml), and what a real gateway answers on every documented path, after real sessions,
// matches the schema the contract gives for that path and status: no required field missing,
// and no field the contract does not list.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { parse } from 'yaml';
import { fixture } from '../support/fixtures.js';
import { startStack, type Stack, type TestClient } from '../support/stack.js';
import { until } from '../support/wait.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const CONTRACT = 'openapi/usage.yaml';
const API_TOKEN = 'openapi-contract-token';
/** A token that reads only tenant `elsewhere`. */
const SCOPED_TOKEN = 'openapi-contract-scoped-token';
const TENANT = 'contract';
const ogg = fixture('dictation.ogg');

type Json = Record<string, any>;
const contract = parse(readFileSync(join(root, CONTRACT), 'utf8')) as Json;

describe(`${CONTRACT} under Redocly's linter`, () => {
  it('has no error and no warning', async () => {
    let stdout: string;
    try {
      // --no: the linter comes from node_modules, never fetched; no update check, no usage report.
      ({ stdout } = await promisify(execFile)('npx', ['--no', 'redocly', 'lint', CONTRACT, '--format=json'], {
        cwd: root,
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_NOTIFICATIONS: 'true' },
      }));
    } catch (err) {
      // It exits non-zero on errors; the report on stdout says which.
      const e = err as { stdout?: string; stderr?: string };
      if (!e.stdout) throw new Error(`redocly lint did not run: ${e.stderr ?? String(err)}`, { cause: err });
      stdout = e.stdout;
    }
    const report = JSON.parse(stdout) as {
      totals: { errors: number; warnings: number };
      problems: Array<{ ruleId: string; severity: string; message: string; location: Array<{ pointer: string }> }>;
    };
    const problems = report.problems.map(
      (p) => `${p.severity} ${p.ruleId} at ${p.location[0]?.pointer ?? '?'}: ${p.message}`,
    );
    assert.deepEqual(problems, [], `redocly lint ${CONTRACT}`);
    assert.deepEqual([report.totals.errors, report.totals.warnings], [0, 0]);
  });
});

/** A copy of the contract where every object an answer holds is closed (unevaluatedProperties:
 *  false), so that a field the contract does not list fails too. The YAML itself stays open, as
 *  clients should tolerate new fields; the test holds the gateway to the exact list. Branches of
 *  allOf/anyOf/oneOf (and the shared definitions they point to) are left open: the schema that
 *  combines them is closed, and sees the fields each branch evaluated. */
function closedContract(doc: Json): Json {
  const copy = structuredClone(doc);
  const walk = (s: unknown, branch: boolean) => {
    if (!s || typeof s !== 'object') return;
    const schema = s as Json;
    for (const v of Object.values((schema.properties as Json | undefined) ?? {})) walk(v, false);
    walk(schema.items, false);
    for (const k of ['allOf', 'anyOf', 'oneOf'])
      for (const b of (schema[k] as unknown[] | undefined) ?? []) walk(b, true);
    if (!branch && !('additionalProperties' in schema)) schema.unevaluatedProperties = false;
  };
  for (const def of Object.values((copy.components?.schemas as Json | undefined) ?? {})) walk(def, true);
  const responses = [
    ...Object.values(copy.paths as Json).flatMap((item: Json) =>
      Object.values(item).flatMap((op: Json) => Object.values((op.responses as Json | undefined) ?? {})),
    ),
    ...Object.values((copy.components?.responses as Json | undefined) ?? {}),
  ] as Json[];
  for (const r of responses)
    for (const media of Object.values((r.content as Json | undefined) ?? {})) walk(media.schema, false);
  return copy;
}

// OpenAPI 3.1's schemas are JSON Schema 2020-12; refs resolve inside the contract's own document.
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats.default(ajv);
ajv.addSchema(closedContract(contract), 'usage');

const escape = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');
const at = (pointer: string): Json =>
  pointer
    .split('/')
    .slice(1)
    .reduce((o: Json, k) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], contract);

const validators = new Map<string, ValidateFunction>();

/** The validator of the JSON body the contract gives for GET `path` answering `status`. */
function validatorFor(path: string, status: number): ValidateFunction {
  const known = validators.get(`${path} ${status}`);
  if (known) return known;
  const responses = contract.paths?.[path]?.get?.responses as Json | undefined;
  assert.ok(responses, `${CONTRACT} has no GET ${path}`);
  let pointer = `/paths/${escape(path)}/get/responses/${status}`;
  assert.ok(responses[status], `${CONTRACT} documents no ${status} answer for GET ${path}`);
  const ref = (responses[status] as Json).$ref as string | undefined;
  if (ref) pointer = ref.slice(1);
  assert.ok(at(pointer)?.content?.['application/json']?.schema, `${CONTRACT}: no JSON schema at ${pointer}`);
  const validate = ajv.compile({ $ref: `usage#${pointer}/content/application~1json/schema` });
  validators.set(`${path} ${status}`, validate);
  return validate;
}

/** Asserts that `body` fits the contract's schema for GET `path` answering `status`. */
function assertFits(path: string, status: number, body: unknown): void {
  const validate = validatorFor(path, status);
  if (validate(body)) return;
  const why = (validate.errors ?? []).map((e) => `  ${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`);
  assert.fail(`GET ${path} ${status} does not fit ${CONTRACT}:\n${why.join('\n')}\n${JSON.stringify(body)}`);
}

describe(`a real gateway's usage API answers as ${CONTRACT} says`, () => {
  let stack: Stack;
  let open: TestClient;
  const answered = new Set<string>();

  /** GET `pathAndQuery` (with the API token unless `token` is null): the answer, checked against the
   *  contract for its path and status. */
  async function get(pathAndQuery: string, token: string | null = API_TOKEN): Promise<{ status: number; body: Json }> {
    const res = await fetch(`http://127.0.0.1:${stack.gateway.server.adminPort}${pathAndQuery}`, {
      headers: token === null ? {} : { authorization: `Bearer ${token}` },
    });
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    const body = (await res.json()) as Json;
    const path = pathAndQuery.split('?')[0];
    assertFits(path, res.status, body);
    answered.add(`${path} ${res.status}`);
    return { status: res.status, body };
  }

  const range = () =>
    `from=${new Date(Date.now() - 86_400_000).toISOString()}&to=${new Date(Date.now() + 86_400_000).toISOString()}`;

  /** A session of `endpoint` with the dictation's audio, ended by the client. */
  async function session(endpoint: 'transcribe' | 'streams'): Promise<void> {
    const c = await stack.connect(endpoint, { tenant: TENANT });
    const audioFormat = 'audio/ogg;codecs=opus';
    c.sendJson({
      type: 'config',
      configuration:
        endpoint === 'transcribe'
          ? { primaryLanguage: 'en', audioFormat }
          : { transcription: { primaryLanguage: 'en' }, mode: { type: 'transcription' }, audioFormat },
    });
    await c.next('CONFIG_ACCEPTED');
    for (let off = 0; off < ogg.length; off += 8000) c.send(ogg.subarray(off, off + 8000));
    c.sendJson({ type: 'end' });
    await c.closed;
  }

  beforeAll(async () => {
    stack = await startStack({
      USAGE_API_TOKEN: API_TOKEN,
      USAGE_API_TOKENS: JSON.stringify({ dash: { token: SCOPED_TOKEN, tenants: ['elsewhere'] } }),
      PACE: '50',
    });
    await session('transcribe');
    await session('streams');
    // One still open: its end, outcome and mediaSeconds are null, which the contract allows.
    open = await stack.connect('transcribe', { tenant: TENANT });
    open.sendJson({ type: 'config', configuration: { primaryLanguage: 'en', audioFormat: 'audio/ogg;codecs=opus' } });
    await open.next('CONFIG_ACCEPTED');
    await until(async () => {
      const { body } = await get(`/v1/usage/sessions?tenant=${TENANT}`);
      const rows = body.sessions as Json[];
      return rows.length === 3 && rows.filter((r) => r.end !== null).length === 2;
    }, 'two ended sessions and an open one in the ledger');
  });
  afterAll(async () => {
    open?.ws.terminate();
    await stack?.close();
  });

  it('GET /v1/usage/sessions: the sessions, ended and open, of both endpoints', async () => {
    const { status, body } = await get(`/v1/usage/sessions?tenant=${TENANT}&${range()}`);
    assert.equal(status, 200);
    const rows = body.sessions as Json[];
    assert.deepEqual(rows.map((r) => r.endpoint).sort(), ['streams', 'transcribe', 'transcribe']);
    assert.ok(
      rows.some((r) => r.end === null && r.outcome === null && r.mediaSeconds === null),
      'the open session has no end yet',
    );
    assert.ok(
      rows.some((r) => r.endpoint === 'streams' && typeof r.interactionId === 'string'),
      'the /streams session has its interaction',
    );
    assert.equal(body.next, null, 'one page');
  });

  it('GET /v1/usage: totals and buckets, by day and by hour, per endpoint', async () => {
    for (const q of ['', '&granularity=hour', '&granularity=day&endpoint=streams']) {
      const { status, body } = await get(`/v1/usage?tenant=${TENANT}&${range()}${q}`);
      assert.equal(status, 200);
      assert.equal(body.total.sessions, q.includes('streams') ? 1 : 3);
    }
    // The last two hours, by day (the default): a range off the buckets' edges, cut to it.
    const lastHours = `from=${new Date(Date.now() - 7_200_000).toISOString()}&to=${new Date(Date.now() + 60_000).toISOString()}`;
    const { status, body } = await get(`/v1/usage?tenant=${TENANT}&${lastHours}`);
    assert.equal(status, 200);
    assert.equal(body.total.sessions, 3);
  });

  it("speech coverage: each ended session's speech and the part transcribed, added up in /v1/usage and told in its session_ended", async () => {
    const rows = (await get(`/v1/usage/sessions?tenant=${TENANT}`)).body.sessions as Json[];
    const ended = rows.filter((r) => r.end !== null);
    assert.equal(ended.length, 2);
    for (const r of ended) {
      // The dictation is speech: the detector hears most of it, and the emulator transcribes it.
      assert.ok(
        r.speechSeconds > 0.5 * r.mediaSeconds,
        `${r.endpoint}: speech ${r.speechSeconds} of ${r.mediaSeconds} s`,
      );
      assert.ok(r.transcribedSpeechSeconds <= r.speechSeconds);
      assert.ok(r.coverage > 0 && r.coverage <= 1, `coverage ${r.coverage}`);
    }
    const open = rows.find((r) => r.end === null)!;
    assert.deepEqual([open.speechSeconds, open.coverage, open.gaps], [null, null, []]);
    const sum = (f: string) => ended.reduce((t, r) => t + Math.round(r[f] * 1000), 0) / 1000;
    const { body } = await get(`/v1/usage?tenant=${TENANT}&${range()}`);
    assert.deepEqual(
      [body.total.speechSeconds, body.total.transcribedSpeechSeconds],
      [sum('speechSeconds'), sum('transcribedSpeechSeconds')],
    );
    const audit = (await get(`/v1/audit?tenant=${TENANT}&${range()}`)).body.events as Json[];
    for (const r of ended) {
      const e = audit.find((a) => a.event === 'session_ended' && a.sessionId === r.sessionKey)!;
      assert.deepEqual(
        [e.speechSeconds, e.transcribedSpeechSeconds, e.gaps],
        [r.speechSeconds, r.transcribedSpeechSeconds, r.gaps.length + r.moreGaps],
      );
    }
  });

  it('GET /v1/tenants: the tenant that has sessions', async () => {
    const { status, body } = await get('/v1/tenants');
    assert.equal(status, 200);
    assert.ok((body.tenants as string[]).includes(TENANT));
  });

  it("GET /v1/audit: the tenant's audit events, the ended sessions among them", async () => {
    const { status, body } = await get(`/v1/audit?tenant=${TENANT}&${range()}`);
    assert.equal(status, 200);
    const events = body.events as Json[];
    assert.equal(events.filter((e) => e.event === 'session_ended').length, 2);
    const page = await get(`/v1/audit?tenant=${TENANT}&${range()}&limit=2`);
    assert.equal((page.body.events as Json[]).length, 2);
    assert.equal(typeof page.body.next, 'string');
  });

  it('403 for a tenant the token may not read; its own tenants only in /v1/tenants', async () => {
    for (const path of ['/v1/usage', '/v1/usage/sessions', '/v1/audit']) {
      const { status, body } = await get(`${path}?tenant=${TENANT}&${range()}`, SCOPED_TOKEN);
      assert.equal(status, 403, path);
      assert.equal(body.error.id, 'USAGE_TENANT_FORBIDDEN', path);
    }
    assert.deepEqual((await get('/v1/tenants', SCOPED_TOKEN)).body.tenants, []);
  });

  it('401 without the token or with a wrong one, on every path', async () => {
    for (const path of Object.keys(contract.paths as Json)) {
      assert.equal((await get(`${path}?tenant=${TENANT}&${range()}`, null)).status, 401);
      assert.equal((await get(`${path}?tenant=${TENANT}&${range()}`, 'wrong')).status, 401);
    }
  });

  it('400 on a missing or invalid parameter', async () => {
    for (const q of [
      `/v1/usage?${range()}`,
      `/v1/usage?tenant=${TENANT}&${range()}&granularity=week`,
      `/v1/usage?tenant=${TENANT}&${range()}&endpoint=fax`,
      `/v1/usage?tenant=${TENANT}&from=yesterday&to=2030-01-01T00:00:00Z`,
      `/v1/usage?tenant=${TENANT}&from=2030-01-02T00:00:00Z&to=2030-01-01T00:00:00Z`,
      `/v1/usage/sessions?tenant=${TENANT}&cursor=not-a-cursor`,
      `/v1/usage/sessions?tenant=a%20b`,
      `/v1/audit?tenant=${TENANT}&${range()}&limit=0`,
      `/v1/audit?tenant=${TENANT}&${range()}&cursor=not-a-cursor`,
      `/v1/audit?tenant=${TENANT}`,
    ]) {
      const { status, body } = await get(q);
      assert.equal(status, 400, q);
      assert.equal(body.error.id, 'BAD_REQUEST', q);
    }
  });

  it('a real answer without a field the contract requires does not fit', async () => {
    const { body } = await get(`/v1/usage/sessions?tenant=${TENANT}`);
    const sessionSchema = contract.components.schemas.Session as Json;
    for (const field of sessionSchema.required as string[]) {
      const broken = structuredClone(body);
      delete (broken.sessions as Json[])[0][field];
      assert.equal(validatorFor('/v1/usage/sessions', 200)(broken), false, `a session without ${field}`);
    }
    const extra = structuredClone(body);
    (extra.sessions as Json[])[0].unlisted = 1;
    assert.equal(validatorFor('/v1/usage/sessions', 200)(extra), false, 'a session with a field not listed');
  });

  it('every documented path answered 200 and 401, and 400 and 403 where the contract has them', () => {
    const expected = Object.entries(contract.paths as Json).flatMap(([path, item]) =>
      ['200', '400', '401', '403'].filter((s) => s in (item as Json).get.responses).map((s) => `${path} ${s}`),
    );
    for (const e of expected) assert.ok(answered.has(e), `no ${e} was seen`);
  });
});
