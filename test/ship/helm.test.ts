// The Helm chart with a real helm (v4): lint --strict, template over the values files in ci/, every
// rendered object validated against the Kubernetes API schemas (the HTTPRoute, a Gateway API kind
// the models lack, against its field lists here), and the settings it renders accepted by the
// gateway's own config loader. Bad values are refused by values.schema.json; no upstream and no
// emulator is refused by the templates.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { loadConfig } from '../../src/config.js';
import { redisSettings } from '../../src/redis/index.js';
import { registry } from '../../src/telemetry/index.js';
import { helm, helmBinary } from './helm-tool.js';
import { unknownFields, validateObject, type K8sObject } from './helm-models.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const chart = join(root, 'helm/speech-gateway');
const valuesFiles = readdirSync(join(chart, 'ci')).filter((f) => f.endsWith('.yaml'));
/** The defaults plus the development emulator: the defaults alone have no upstream and do not render. */
const dev = join(chart, 'ci', 'emulator-values.yaml');
const extras = join(chart, 'ci', 'extras-values.yaml');
let home: string;

beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), 'helm-'));
  helmBinary(); // unpack once, before the tests run helm side by side
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

/** Renders the chart with the values files, --set and --set-json pairs; the objects, or helm's exit and stderr. */
async function render(files: string[], set: string[] = [], setJson: string[] = []) {
  const args = [
    'template',
    'sgw',
    chart,
    ...files.flatMap((f) => ['-f', f]),
    ...set.flatMap((s) => ['--set', s]),
    ...setJson.flatMap((s) => ['--set-json', s]),
  ];
  const r = await helm(args, home);
  const objects =
    r.code === 0
      ? parseAllDocuments(r.stdout)
          .map((d) => d.toJS() as K8sObject)
          .filter(Boolean)
      : [];
  return { ...r, objects };
}

function one(objects: K8sObject[], kind: string): K8sObject & { spec: any; data: any } {
  const found = objects.filter((o) => o.kind === kind);
  assert.equal(found.length, 1, `one ${kind} (got ${found.length})`);
  return found[0] as never;
}

/** Throws, naming the path, when an HTTPRoute (gateway.networking.k8s.io/v1) has a field or value
 * the Gateway API's CRD would refuse: its field lists, required fields, enums and formats. */
function validateHttpRoute(o: K8sObject & { spec?: any }): void {
  const fail = (what: string) => {
    throw new Error(`HTTPRoute ${o.metadata?.name}: ${what}`);
  };
  const only = (value: unknown, path: string, keys: string[], required: string[] = []) => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) fail(`${path} is not an object`);
    const extra = Object.keys(value as object).filter((k) => !keys.includes(k));
    if (extra.length) fail(`unknown fields ${extra.map((k) => `${path}.${k}`).join(', ')}`);
    for (const k of required) if ((value as Record<string, unknown>)[k] === undefined) fail(`${path}.${k} is required`);
  };
  const list = (value: unknown, path: string): unknown[] =>
    Array.isArray(value) ? value : fail(`${path} is not a list`);
  const name = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
  const duration = /^([0-9]{1,5}(h|m|s|ms)){1,4}$/;
  if (o.apiVersion !== 'gateway.networking.k8s.io/v1') fail(`apiVersion ${o.apiVersion}`);
  only(o, '', ['apiVersion', 'kind', 'metadata', 'spec'], ['metadata', 'spec']);
  const meta = unknownFields(o.metadata, 'V1ObjectMeta', '.metadata');
  if (meta.length) fail(`unknown fields ${meta.join(', ')}`);
  if (!name.test(o.metadata.name)) fail(`.metadata.name ${o.metadata.name}`);
  only(o.spec, '.spec', ['parentRefs', 'hostnames', 'rules']);
  for (const [i, ref] of list(o.spec.parentRefs ?? [], '.spec.parentRefs').entries()) {
    only(ref, `.spec.parentRefs[${i}]`, ['group', 'kind', 'namespace', 'name', 'sectionName', 'port'], ['name']);
    if (!name.test((ref as any).name)) fail(`.spec.parentRefs[${i}].name ${(ref as any).name}`);
  }
  for (const h of list(o.spec.hostnames ?? [], '.spec.hostnames'))
    if (typeof h !== 'string' || !/^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(h))
      fail(`.spec.hostnames: ${String(h)}`);
  for (const [i, rule] of list(o.spec.rules ?? [], '.spec.rules').entries()) {
    const at = `.spec.rules[${i}]`;
    only(rule, at, ['name', 'matches', 'filters', 'backendRefs', 'timeouts', 'retry', 'sessionPersistence']);
    const r = rule as any;
    for (const [j, m] of list(r.matches ?? [], `${at}.matches`).entries()) {
      only(m, `${at}.matches[${j}]`, ['path', 'headers', 'queryParams', 'method']);
      const path = (m as any).path;
      if (path === undefined) continue;
      only(path, `${at}.matches[${j}].path`, ['type', 'value']);
      if (!['Exact', 'PathPrefix', 'RegularExpression'].includes(path.type ?? 'PathPrefix'))
        fail(`${at}.matches[${j}].path.type ${path.type}`);
      if (!String(path.value ?? '/').startsWith('/')) fail(`${at}.matches[${j}].path.value ${path.value}`);
    }
    for (const [j, b] of list(r.backendRefs ?? [], `${at}.backendRefs`).entries()) {
      only(b, `${at}.backendRefs[${j}]`, ['group', 'kind', 'name', 'namespace', 'port', 'weight', 'filters'], ['name']);
      const ref = b as any;
      if ((ref.kind ?? 'Service') === 'Service' && !Number.isInteger(ref.port))
        fail(`${at}.backendRefs[${j}].port is required`);
    }
    if (r.timeouts !== undefined) {
      only(r.timeouts, `${at}.timeouts`, ['request', 'backendRequest']);
      for (const [k, v] of Object.entries(r.timeouts))
        if (!duration.test(String(v))) fail(`${at}.timeouts.${k} ${String(v)}`);
    }
  }
}

/** Every object the chart renders, each against its schema. */
function validate(o: K8sObject): void {
  if (o.kind === 'HTTPRoute') validateHttpRoute(o);
  else validateObject(o);
}

/** What an operator's existing Secret holds (the chart only names it). */
const existingSecretData = { UPSTREAM_CREDENTIALS: '{"*":{"clientId":"gateway","clientSecret":"s"}}' };

/** What the downward API tells one pod about itself. */
const podFields: Record<string, string> = {
  'metadata.name': 'sgw-speech-gateway-6b7c9d5f4-x2v4q',
  'status.podIP': '10.1.2.3',
};

/** The environment a pod gets: its ConfigMap, plus the Secret it names (the chart's, decoded, or an
 * existing one), then its own `env` entries (downward API fields, `$(VAR)` expanded as the kubelet does). */
function podEnv(objects: K8sObject[]): Record<string, string> {
  const container = one(objects, 'Deployment').spec.template.spec.containers[0];
  const ref = container.envFrom.find((e: any) => e.secretRef)?.secretRef.name;
  const secret = objects.find((o) => o.kind === 'Secret' && o.metadata.name === ref) as
    { data?: Record<string, string> } | undefined;
  const decoded = Object.entries(secret?.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]);
  const env: Record<string, string> = {
    ...one(objects, 'ConfigMap').data,
    ...(ref && !secret ? existingSecretData : Object.fromEntries(decoded)),
  };
  for (const e of container.env ?? []) {
    // Only the downward API is known here: a Secret or ConfigMap key named by an extra entry is not.
    if (e.valueFrom && !e.valueFrom.fieldRef) continue;
    env[e.name] = e.valueFrom
      ? podFields[e.valueFrom.fieldRef.fieldPath]
      : e.value.replace(/\$\((\w+)\)/g, (m: string, name: string) => env[name] ?? m);
  }
  return env;
}

describe('helm chart', () => {
  it('passes helm lint --strict with its defaults and every ci values file', async () => {
    for (const f of ['', ...valuesFiles]) {
      const r = await helm(['lint', '--strict', chart, ...(f ? ['-f', join(chart, 'ci', f)] : [])], home);
      assert.equal(r.code, 0, `lint ${f || 'defaults'}: ${r.stdout}${r.stderr}`);
    }
  });

  it.each(valuesFiles)('%s renders objects that validate and settings the gateway accepts', async (f) => {
    const r = await render([join(chart, 'ci', f)]);
    assert.equal(r.code, 0, r.stderr);
    for (const o of r.objects) validate(o);
    for (const kind of ['Deployment', 'Service', 'ConfigMap', 'PodDisruptionBudget', 'NetworkPolicy'])
      one(r.objects, kind);
    const config = loadConfig(podEnv(r.objects)); // throws with the variable's name if it would not start
    assert.equal(config.USAGE_JOURNAL_DIR, '/var/lib/speech-gateway/usage-journal');
  });

  it('has the API server refuse a field it does not know, as kubectl would', async () => {
    const { objects } = await render([dev], ['affinity.nodeAfinity.x=1']);
    assert.throws(
      () => objects.forEach(validate),
      /Deployment sgw-speech-gateway: unknown fields \.spec\.template\.spec\.affinity\.nodeAfinity$/,
    );
  });

  it('runs non-root on a read-only root filesystem, writing only the journal volume and /tmp', async () => {
    const { objects } = await render([dev]);
    const pod = one(objects, 'Deployment').spec.template.spec;
    const [c] = pod.containers;
    assert.equal(pod.securityContext.runAsNonRoot, true);
    assert.ok(pod.securityContext.runAsUser > 0);
    assert.equal(c.securityContext.readOnlyRootFilesystem, true);
    assert.equal(c.securityContext.allowPrivilegeEscalation, false);
    const mounts = Object.fromEntries(c.volumeMounts.map((m: any) => [m.mountPath, m.name]));
    assert.deepEqual(Object.keys(mounts).sort(), ['/tmp', podEnv(objects).USAGE_JOURNAL_DIR].sort());
    for (const v of pod.volumes) assert.ok(v.emptyDir, `${v.name} is an emptyDir by default`);
  });

  it('probes /healthz and /readyz, and gives the drain its time before the kubelet kills the pod', async () => {
    const { objects } = await render([join(chart, 'ci', 'production-values.yaml')]);
    const pod = one(objects, 'Deployment').spec.template.spec;
    const [c] = pod.containers;
    assert.equal(c.livenessProbe.httpGet.path, '/healthz');
    assert.equal(c.readinessProbe.httpGet.path, '/readyz');
    const [cmd, sleep] = c.lifecycle.preStop.exec.command;
    assert.equal(cmd, 'sleep');
    const env = loadConfig(podEnv(objects));
    assert.equal(env.DRAIN_SECONDS, 120);
    // The handover of resumable sessions (up to END_TIMEOUT_MS), then the drain of the others.
    const needed = Number(sleep) + env.END_TIMEOUT_MS / 1000 + env.DRAIN_SECONDS + env.END_TIMEOUT_MS / 1000;
    assert.ok(pod.terminationGracePeriodSeconds > needed, `grace ${pod.terminationGracePeriodSeconds} s > ${needed} s`);
  });

  it('rolls one pod at a time without losing capacity: a new pod is ready before an old one stops', async () => {
    const { objects } = await render([join(chart, 'ci', 'production-values.yaml')]);
    const { strategy } = one(objects, 'Deployment').spec;
    assert.deepEqual(strategy, { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
  });

  it('gives each pod its replica id (the pod name) and its internal address (the pod IP, the admin port)', async () => {
    const { objects } = await render([join(chart, 'ci', 'production-values.yaml')]);
    const env = loadConfig(podEnv(objects));
    assert.equal(env.REPLICA_ID, podFields['metadata.name']);
    assert.equal(env.ADVERTISE_URL, 'ws://10.1.2.3:9090');
    assert.equal(env.ADMIN_PORT, 9090);
    assert.equal(env.PORT, 8080);
  });

  it('exposes only the client port: the Service, Ingress and HTTPRoute never reach the admin port', async () => {
    const { objects } = await render([extras]);
    const [c] = one(objects, 'Deployment').spec.template.spec.containers;
    assert.deepEqual(
      c.ports.map((p: any) => [p.name, p.containerPort]),
      [
        ['http', 8080],
        ['admin', 9090],
      ],
    );
    const service = one(objects, 'Service');
    assert.deepEqual(
      service.spec.ports.map((p: any) => p.targetPort),
      ['http'],
      'the Service has no admin port',
    );
    assert.equal(one(objects, 'Ingress').spec.rules[0].http.paths[0].backend.service.port.name, 'http');
    assert.deepEqual(
      one(objects, 'HTTPRoute').spec.rules[0].backendRefs.map((b: any) => b.port),
      [service.spec.ports[0].port],
    );
    // Moved together: the ports, the gateway's settings and the hop's address.
    const moved = await render([dev], ['adminPort=9500', 'containerPort=8500']);
    const env = loadConfig(podEnv(moved.objects));
    assert.deepEqual([env.PORT, env.ADMIN_PORT, env.ADVERTISE_URL], [8500, 9500, 'ws://10.1.2.3:9500']);
    const same = await render([dev], ['adminPort=8080']);
    assert.notEqual(same.code, 0, 'one port for both listeners rendered');
    assert.match(same.stderr, /containerPort and adminPort are both 8080/);
  });

  it('renders a NetworkPolicy by default: the client port open, the admin port to its own pods and the named namespaces', async () => {
    const { objects } = await render([join(chart, 'ci', 'existing-secret-values.yaml')]);
    const policy = one(objects, 'NetworkPolicy');
    validate(policy);
    const own = one(objects, 'Deployment').spec.selector.matchLabels;
    assert.deepEqual(policy.spec.podSelector.matchLabels, own);
    assert.deepEqual(policy.spec.policyTypes, ['Ingress']);
    const [client, admin, ...more] = policy.spec.ingress;
    assert.equal(more.length, 0);
    assert.deepEqual(client, { ports: [{ port: 'http', protocol: 'TCP' }] }, 'the client port from anywhere');
    assert.deepEqual(admin.ports, [{ port: 'admin', protocol: 'TCP' }]);
    assert.deepEqual(admin.from, [
      { podSelector: { matchLabels: own } },
      {
        namespaceSelector: {
          matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['monitoring'] }],
        },
      },
    ]);
    const off = await render([dev], ['networkPolicy.enabled=false']);
    assert.equal(off.objects.filter((o) => o.kind === 'NetworkPolicy').length, 0);
  });

  it('renders the NetworkPolicy peers it is given: client peers, admin namespaces and extra admin peers', async () => {
    const { code, stderr, objects } = await render(
      [dev],
      [],
      [
        'networkPolicy.clientFrom=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"ingress-nginx"}}}]',
        'networkPolicy.adminFromNamespaces=["observability","billing"]',
        'networkPolicy.extraAdminFrom=[{"ipBlock":{"cidr":"10.20.0.0/16"}}]',
      ],
    );
    assert.equal(code, 0, stderr);
    const policy = one(objects, 'NetworkPolicy');
    validate(policy);
    const [client, admin] = policy.spec.ingress;
    assert.deepEqual(client.from, [
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } },
    ]);
    assert.deepEqual(admin.from.slice(1), [
      {
        namespaceSelector: {
          matchExpressions: [
            { key: 'kubernetes.io/metadata.name', operator: 'In', values: ['observability', 'billing'] },
          ],
        },
      },
      { ipBlock: { cidr: '10.20.0.0/16' } },
    ]);
    // A sidecar's port (the TLS terminator in front of the hop, extras-values.yaml) gets its own rule.
    const extra = one((await render([extras])).objects, 'NetworkPolicy');
    validate(extra);
    assert.deepEqual(extra.spec.ingress.at(-1).ports, [{ port: 'hop-tls', protocol: 'TCP' }]);
    assert.equal(extra.spec.ingress.length, 3);
    // No namespace named: the release's own pods (the hop) and nobody else.
    const none = one((await render([dev], [], ['networkPolicy.adminFromNamespaces=[]'])).objects, 'NetworkPolicy');
    assert.deepEqual(none.spec.ingress[1].from, [
      { podSelector: { matchLabels: admin.from[0].podSelector.matchLabels } },
    ]);
  });

  it('refuses a termination grace shorter than the drain', async () => {
    const r = await render([dev], ['terminationGracePeriodSeconds=30']);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /terminationGracePeriodSeconds 30 is shorter than the drain needs: 105/);
  });

  it('with the ingress-nginx preset, keeps /streams connections open 2 hours and hashes on the resume key', async () => {
    const { objects } = await render([join(chart, 'ci', 'production-values.yaml')]);
    const a = one(objects, 'Ingress').metadata.annotations as Record<string, string>;
    assert.ok(Number(a['nginx.ingress.kubernetes.io/proxy-read-timeout']) >= 7200);
    assert.ok(Number(a['nginx.ingress.kubernetes.io/proxy-send-timeout']) >= 7200);
    assert.equal(a['nginx.ingress.kubernetes.io/upstream-hash-by'], '$arg_resume');
  });

  it('scales on CPU and on a metric the gateway exports', async () => {
    const { objects } = await render([join(chart, 'ci', 'production-values.yaml')]);
    const metrics = one(objects, 'HorizontalPodAutoscaler').spec.metrics;
    assert.deepEqual(
      metrics.map((m: any) => m.type),
      ['Resource', 'Pods'],
    );
    assert.ok(registry.getSingleMetric(metrics[1].pods.metric.name), `${metrics[1].pods.metric.name} is exported`);
    assert.equal(one(objects, 'Deployment').spec.replicas, undefined, 'the autoscaler owns the replica count');
  });

  it('puts credentials, the usage token, the Redis URL and the cluster secret in the Secret, never the ConfigMap', async () => {
    const { objects } = await render([join(chart, 'ci', 'production-values.yaml')]);
    const env = loadConfig(podEnv(objects));
    assert.deepEqual(JSON.parse(env.UPSTREAM_CREDENTIALS ?? ''), {
      '*': { clientId: 'gateway', clientSecret: 'client-secret-value' },
    });
    assert.equal(env.CLUSTER_SECRET, 'cluster-secret-value-0123456789abcdef');
    // YAML numbers reach templates as floats: written as integers, not 8.388608e+06.
    assert.equal(one(objects, 'ConfigMap').data.MAX_BUFFERED_AUDIO_BYTES, '8388608');
    const configMap = JSON.stringify(one(objects, 'ConfigMap'));
    for (const secret of ['client-secret-value', 'usage-token-value', 'redis-password', 'cluster-secret-value'])
      assert.ok(!configMap.includes(secret), secret);
  });

  it('renders Redis behind Sentinel: addresses and name in the ConfigMap, the passwords only in the Secret', async () => {
    const { objects } = await render([join(chart, 'ci', 'sentinel-values.yaml')]);
    const env = loadConfig(podEnv(objects));
    assert.deepEqual(redisSettings(env), {
      sentinels: [
        { host: 'redis-sentinel-0.redis-sentinel', port: 26379 },
        { host: 'redis-sentinel-1.redis-sentinel', port: 26379 },
        { host: 'fd00::12', port: 26379 },
      ],
      name: 'gateway-primary',
      username: 'gateway',
      password: 'redis-data-password',
      sentinelPassword: 'redis-sentinel-password',
    });
    const configMap = JSON.stringify(one(objects, 'ConfigMap'));
    for (const secret of ['redis-data-password', 'redis-sentinel-password']) assert.ok(!configMap.includes(secret));
  });

  it('renders Redis behind Sentinel over TLS: REDIS_SENTINEL_TLS in the ConfigMap', async () => {
    const { objects } = await render([join(chart, 'ci', 'sentinel-tls-values.yaml')]);
    const settings = redisSettings(loadConfig(podEnv(objects)));
    assert.ok(settings && 'sentinels' in settings && settings.tls === true, JSON.stringify(settings));
  });

  it('reads an existing Secret by name and renders none of its own', async () => {
    const { objects } = await render([join(chart, 'ci', 'existing-secret-values.yaml')]);
    assert.equal(objects.filter((o) => o.kind === 'Secret').length, 0);
    const pod = one(objects, 'Deployment').spec.template.spec;
    assert.ok(pod.containers[0].envFrom.some((e: any) => e.secretRef?.name === 'speech-gateway-credentials'));
  });

  it('renders the alert rules file the Prometheus tests check, as it is, into the PrometheusRule', async () => {
    const source = readFileSync(join(root, 'grafana/alerts.yaml'), 'utf8');
    assert.equal(
      readFileSync(join(chart, 'files', 'alerts.yaml'), 'utf8'),
      source,
      'the chart copy is stale: npm run helm:rules',
    );
    const { objects } = await render([join(chart, 'ci', 'monitoring-values.yaml')]);
    assert.deepEqual(one(objects, 'PrometheusRule').spec.groups, parse(source).groups);
    const monitor = one(objects, 'PodMonitor');
    assert.deepEqual(monitor.spec.podMetricsEndpoints[0], {
      port: 'admin',
      path: '/metrics',
      interval: '30s',
      scrapeTimeout: '10s',
    });
    assert.deepEqual(monitor.spec.selector.matchLabels, one(objects, 'Deployment').spec.selector.matchLabels);
  });

  it('refuses to render without an upstream or the development emulator, saying what to set', async () => {
    const none = await render([]);
    assert.notEqual(none.code, 0, 'the defaults rendered');
    assert.match(
      none.stderr,
      /no upstream configured: set config\.UPSTREAM_URL and config\.AUTH_URL \(the speech service\), or environments \(one upstream per environment\), or emulator\.enabled=true for the embedded emulator \(development only/,
    );
    const both = await render(
      [dev],
      ['config.UPSTREAM_URL=wss://upstream.example', 'config.AUTH_URL=https://auth.example'],
    );
    assert.notEqual(both.code, 0, 'the emulator and an upstream rendered together');
    assert.match(both.stderr, /emulator\.enabled and config\.UPSTREAM_URL \(or environments\) are both set/);
    // Either one alone renders: the emulator's pods have no upstream, the upstream's no emulator value.
    const emulated = loadConfig(podEnv((await render([dev])).objects));
    assert.equal(emulated.UPSTREAM_URL, undefined);
    const real = loadConfig(podEnv((await render([join(chart, 'ci', 'existing-secret-values.yaml')])).objects));
    assert.equal(real.UPSTREAM_URL, 'wss://api.eu.corti.app/audio-bridge/v2');
  });

  it('renders per-environment upstreams the gateway accepts, and refuses them mixed with another form', async () => {
    const eu = ['environments.eu.upstreamUrl=wss://api.eu.corti.app/audio-bridge/v2'];
    eu.push('environments.eu.authUrl=https://auth.eu.corti.app');
    const us = ['environments.us.upstreamUrl=wss://api.us.corti.app/audio-bridge/v2'];
    us.push('environments.us.authUrl=https://auth.us.corti.app');
    const two = await render([], [...us, ...eu, 'config.DEFAULT_ENVIRONMENT=us']);
    assert.equal(two.code, 0, two.stderr);
    const env = podEnv(two.objects);
    assert.equal(env.ENVIRONMENTS, 'eu,us');
    const config = loadConfig(env);
    assert.equal(config.defaultEnvironment, 'us');
    assert.deepEqual(config.environments, [
      { name: 'eu', upstreamUrl: 'wss://api.eu.corti.app/audio-bridge/v2', authUrl: 'https://auth.eu.corti.app' },
      { name: 'us', upstreamUrl: 'wss://api.us.corti.app/audio-bridge/v2', authUrl: 'https://auth.us.corti.app' },
    ]);
    const dashed = await render(
      [],
      ['environments.eu-west.upstreamUrl=wss://x.example', 'environments.eu-west.authUrl=https://y.example'],
    );
    assert.equal(loadConfig(podEnv(dashed.objects)).environments[0].upstreamUrl, 'wss://x.example');
    const refused: Array<[string[], RegExp]> = [
      [[...eu, 'emulator.enabled=true'], /emulator\.enabled and config\.UPSTREAM_URL \(or environments\) are both set/],
      [
        [...eu, 'config.UPSTREAM_URL=wss://u.example', 'config.AUTH_URL=https://a.example'],
        /environments and config\.UPSTREAM_URL are both set/,
      ],
      [[...eu, 'config.ENVIRONMENTS=eu'], /environments and config\.ENVIRONMENTS are both set/],
      [[...eu, 'config.DEFAULT_ENVIRONMENT=us'], /config\.DEFAULT_ENVIRONMENT is not one of environments/],
      [[eu[0]], /authUrl/],
      [['environments.EU.upstreamUrl=wss://x.example', 'environments.EU.authUrl=https://y.example'], /EU|environments/],
      [['environments.eu.upstreamUrl=https://x.example', eu[1]], /upstreamUrl/],
    ];
    for (const [set, named] of refused) {
      const r = await render([], set);
      assert.notEqual(r.code, 0, `rendered ${set.join(' ')}`);
      assert.match(r.stderr, named, set.join(' '));
    }
    // The emulators: one per environment, the chart's rule kept (emulator.enabled asked for explicitly).
    const emulated = await render([dev], ['config.ENVIRONMENTS=eu\\,us']);
    assert.equal(emulated.code, 0, emulated.stderr);
    assert.deepEqual(loadConfig(podEnv(emulated.objects)).environments, [{ name: 'eu' }, { name: 'us' }]);
  });

  it('fits the preStop sleep inside the grace period, ahead of the whole drain', async () => {
    for (const [sleep, drain] of [
      [0, 30],
      [5, 30],
      [45, 120],
    ]) {
      const { code, stderr, objects } = await render(
        [dev],
        [`preStopSleepSeconds=${sleep}`, `config.DRAIN_SECONDS=${drain}`, 'drainMarginSeconds=10'],
      );
      assert.equal(code, 0, stderr);
      const pod = one(objects, 'Deployment').spec.template.spec;
      const { preStop } = pod.containers[0].lifecycle ?? {};
      if (sleep === 0) {
        assert.equal(preStop, undefined, 'no hook for no sleep');
      } else {
        assert.deepEqual(preStop.exec.command, ['sleep', String(sleep)]);
      }
      const env = loadConfig(podEnv(objects));
      // The kubelet's grace clock runs through the hook: what is left after it must hold the drain.
      const drainNeeds = env.END_TIMEOUT_MS / 1000 + env.DRAIN_SECONDS + env.END_TIMEOUT_MS / 1000;
      const left = pod.terminationGracePeriodSeconds - sleep;
      assert.ok(
        left >= drainNeeds + 10,
        `sleep ${sleep} s: ${left} s left after it, the drain needs ${drainNeeds} s + 10`,
      );
    }
    const short = await render([dev], ['preStopSleepSeconds=60', 'terminationGracePeriodSeconds=100']);
    assert.notEqual(short.code, 0, 'a grace that the sleep eats into was accepted');
    assert.match(short.stderr, /terminationGracePeriodSeconds 100 is shorter than the drain needs: 160/);
  });

  it('spreads replicas over nodes and zones by default, softly, selecting its own pods', async () => {
    const deployment = one((await render([dev])).objects, 'Deployment');
    const { topologySpreadConstraints: spread } = deployment.spec.template.spec;
    assert.deepEqual(
      spread.map((c: any) => [c.topologyKey, c.whenUnsatisfiable, c.maxSkew]),
      [
        ['kubernetes.io/hostname', 'ScheduleAnyway', 1],
        ['topology.kubernetes.io/zone', 'ScheduleAnyway', 1],
      ],
    );
    for (const c of spread) {
      assert.deepEqual(c.labelSelector, { matchLabels: deployment.spec.selector.matchLabels });
      assert.deepEqual(c.matchLabelKeys, ['pod-template-hash']);
    }
    const off = one((await render([dev], [], ['topologySpreadConstraints=[]'])).objects, 'Deployment');
    assert.equal(off.spec.template.spec.topologySpreadConstraints, undefined, '[] turns spreading off');
  });

  it('renders extra env, volumes, mounts, sidecars, pod annotations, a priority class and its own spreading', async () => {
    const { code, stderr, objects } = await render([extras]);
    assert.equal(code, 0, stderr);
    const pod = one(objects, 'Deployment').spec.template;
    const [gateway, sidecar, ...more] = pod.spec.containers;
    assert.equal(more.length, 0);
    assert.equal(gateway.name, 'gateway');
    // After the chart's own entries, so an extra one with the same name wins.
    assert.deepEqual(
      gateway.env.map((e: any) => e.name),
      ['REPLICA_ID', 'POD_IP', 'ADVERTISE_URL', 'NODE_EXTRA_CA_CERTS', 'USAGE_API_TOKEN'],
    );
    assert.deepEqual(gateway.env[4].valueFrom, { secretKeyRef: { name: 'usage-api', key: 'token' } });
    assert.deepEqual(gateway.volumeMounts.at(-1), {
      name: 'extra-ca',
      mountPath: '/etc/speech-gateway/ca',
      readOnly: true,
    });
    assert.deepEqual(pod.spec.volumes.at(-1), { name: 'extra-ca', configMap: { name: 'corporate-ca' } });
    assert.equal(sidecar.name, 'hop-tls');
    assert.equal(sidecar.image, 'registry.example.com/tls-proxy:1.0');
    assert.equal(pod.metadata.annotations['example.com/team'], 'speech');
    assert.ok(pod.metadata.annotations['checksum/config'], 'the checksums stay beside extra annotations');
    assert.equal(pod.spec.priorityClassName, 'speech-critical');
    assert.deepEqual(pod.spec.topologySpreadConstraints, [
      {
        maxSkew: 2,
        topologyKey: 'topology.kubernetes.io/zone',
        whenUnsatisfiable: 'DoNotSchedule',
        labelSelector: { matchLabels: one(objects, 'Deployment').spec.selector.matchLabels },
      },
    ]);
    const defaults = one((await render([dev])).objects, 'Deployment').spec.template.spec;
    assert.equal(defaults.priorityClassName, undefined);
    assert.deepEqual(
      defaults.containers.map((c: any) => c.name),
      ['gateway'],
    );
  });

  it('renders an Ingress for any controller: class and annotations from values, nginx ones only on request', async () => {
    const plain = one((await render([dev], ['ingress.enabled=true'])).objects, 'Ingress');
    assert.equal(plain.metadata.annotations, undefined, 'no controller annotations by default');
    assert.equal(plain.spec.ingressClassName, undefined, 'the cluster default class');
    const { objects } = await render([extras]);
    const ingress = one(objects, 'Ingress');
    assert.equal(ingress.spec.ingressClassName, 'traefik');
    assert.deepEqual(ingress.metadata.annotations, { 'traefik.ingress.kubernetes.io/router.entrypoints': 'websecure' });
    assert.equal(ingress.spec.rules[0].http.paths[0].path, '/audio-bridge/');
  });

  it('renders a Gateway API HTTPRoute to the Service when asked, and none by default', async () => {
    assert.equal((await render([dev])).objects.filter((o) => o.kind === 'HTTPRoute').length, 0);
    const { objects } = await render([extras]);
    const route = one(objects, 'HTTPRoute');
    validate(route);
    assert.deepEqual(route.spec.parentRefs, [
      { name: 'public-gateway', namespace: 'gateway-system', sectionName: 'https' },
    ]);
    assert.deepEqual(route.spec.hostnames, ['speech.example.com']);
    assert.equal((route.metadata.annotations as Record<string, string>)['example.com/owner'], 'speech');
    const [rule] = route.spec.rules;
    assert.deepEqual(rule.matches, [{ path: { type: 'PathPrefix', value: '/audio-bridge/' } }]);
    assert.deepEqual(rule.timeouts, { request: '0s' });
    const service = one(objects, 'Service');
    assert.deepEqual(rule.backendRefs, [{ name: service.metadata.name, port: service.spec.ports[0].port }]);
    const plain = one(
      (await render([dev], ['httpRoute.enabled=true', 'httpRoute.parentRefs[0].name=gw'])).objects,
      'HTTPRoute',
    );
    validate(plain);
    assert.equal(plain.spec.hostnames, undefined, "the listener's host names");
    assert.deepEqual(plain.spec.rules[0].matches, [{ path: { type: 'PathPrefix', value: '/' } }]);
    assert.throws(
      () => validate({ ...route, spec: { ...route.spec, rules: [{ ...rule, backendRef: [] }] } }),
      /unknown fields/,
    );
  });

  it.each([
    [['replicaCount=-1'], /replicaCount/],
    [['unknownKey=1'], /unknownKey/],
    [['config.DRAIN_SECONDS=abc'], /DRAIN_SECONDS/],
    [['config.CHUNK_MS=5'], /CHUNK_MS/],
    [['config.NOT_A_SETTING=1'], /NOT_A_SETTING/],
    [['ingress.nginx.timeoutSeconds=60'], /timeoutSeconds/],
    [['ingress.resumeAffinity=true'], /resumeAffinity/],
    [['emulator.enabled=yes'], /emulator/],
    [['extraEnv[0].value=x'], /extraEnv/],
    [['extraVolumeMounts[0].name=x'], /mountPath/],
    [['extraContainers[0].name=gateway', 'extraContainers[0].image=x'], /extraContainers/],
    [['topologySpreadConstraints[0].whenUnsatisfiable=Sometimes'], /whenUnsatisfiable/],
    [['httpRoute.enabled=true'], /parentRefs/],
    [['httpRoute.enabled=true', 'httpRoute.parentRefs[0].name=Bad_Name'], /parentRefs/],
    [['podSecurityContext.runAsNonRoot=false'], /runAsNonRoot/],
    [['securityContext.readOnlyRootFilesystem=false'], /readOnlyRootFilesystem/],
    [['config.UPSTREAM_URL=wss://upstream.example'], /AUTH_URL/],
    [['config.UPSTREAM_AUTH=client-credentials'], /upstreamCredentials/],
    [['redis.url=http://redis:6379'], /redis/],
    [['redis.url=redis://r:6379', 'redis.sentinels[0]=s:26379', 'redis.sentinelName=p'], /sentinels/],
    [['redis.sentinels[0]=s:26379'], /sentinelName/],
    [['redis.sentinelName=p'], /sentinelName/],
    [['redis.sentinels[0]=redis://s:26379', 'redis.sentinelName=p'], /sentinels/],
    [['redis.sentinels[0]=s:26379', 'redis.sentinelName=a b'], /sentinelName/],
    [['redis.url=redis://r:6379', 'redis.password=pw'], /password/],
    [['redis.sentinelPassword=pw'], /sentinelPassword/],
    [['secret.existingSecret=s', 'redis.sentinels[0]=s:1', 'redis.sentinelName=p', 'redis.password=pw'], /password/],
    [['secret.existingSecret=s', 'secret.usageApiToken=t'], /usageApiToken/],
    [['secret.clusterSecret=too-short'], /clusterSecret/],
    [['rollingUpdate.maxSurge=0'], /maxSurge/],
    [['adminPort=0'], /adminPort/],
    [['serviceMonitor.enabled=true'], /serviceMonitor/],
    [['networkPolicy.enabled=yes'], /enabled/],
    [['networkPolicy.adminFromNamespaces[0]=Not_A_Namespace'], /adminFromNamespaces/],
    [['networkPolicy.extraAdminFrom[0].pods=x'], /extraAdminFrom/],
    [['networkPolicy.clientFrom[0].ipBlock.except[0]=10.0.0.0/8'], /cidr/],
    [['networkPolicy.extraIngress[0].to=x'], /extraIngress/],
  ])('refuses %j, naming it', async (set, named) => {
    const r = await render([], set);
    assert.notEqual(r.code, 0, 'helm template succeeded');
    assert.match(r.stderr, /values don't meet the specifications of the schema/);
    assert.match(r.stderr, named);
  });
});
