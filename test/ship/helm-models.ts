// Rendered chart objects checked against the Kubernetes API schemas: each kubernetes-models class
// validates its input (types, required fields, enums); the Prometheus Operator's CRDs likewise.
// Those schemas let unknown fields through, which the API server refuses (strict field
// validation): the field lists of @kubernetes/client-node's generated models catch them.
import * as api from '@kubernetes/client-node/dist/gen/models/all.js';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import { PodMonitor, PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; [k: string]: unknown };
  [k: string]: unknown;
}

interface Model {
  validate(): void;
}
/** Per kind: its kubernetes-models class, and its client-node model name for the field check (CRDs: none). */
const models: Record<string, [new (data: never) => Model, string?]> = {
  'apps/v1/Deployment': [Deployment, 'V1Deployment'],
  'autoscaling/v2/HorizontalPodAutoscaler': [HorizontalPodAutoscaler, 'V2HorizontalPodAutoscaler'],
  'networking.k8s.io/v1/Ingress': [Ingress, 'V1Ingress'],
  'networking.k8s.io/v1/NetworkPolicy': [NetworkPolicy, 'V1NetworkPolicy'],
  'policy/v1/PodDisruptionBudget': [PodDisruptionBudget, 'V1PodDisruptionBudget'],
  'v1/ConfigMap': [ConfigMap, 'V1ConfigMap'],
  'v1/Secret': [Secret, 'V1Secret'],
  'v1/Service': [Service, 'V1Service'],
  'v1/ServiceAccount': [ServiceAccount, 'V1ServiceAccount'],
  'monitoring.coreos.com/v1/PrometheusRule': [PrometheusRule],
  'monitoring.coreos.com/v1/PodMonitor': [PodMonitor],
};

type Attribute = { baseName: string; type: string };
const apiModels = api as unknown as Record<string, { getAttributeTypeMap?(): Attribute[] } | undefined>;

/** Paths of the fields in value that its type does not declare (type as client-node spells it). */
export function unknownFields(value: unknown, type: string, path: string): string[] {
  if (value === null || typeof value !== 'object') return [];
  const list = /^Array<(.+)>$/.exec(type);
  if (list) return (value as unknown[]).flatMap((v, i) => unknownFields(v, list[1], `${path}[${i}]`));
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) return Object.entries(value).flatMap(([k, v]) => unknownFields(v, map[1], `${path}.${k}`));
  const fields = apiModels[type]?.getAttributeTypeMap?.();
  if (!fields) return []; // any, IntOrString, a scalar
  const types = new Map(fields.map((f) => [f.baseName, f.type]));
  return Object.entries(value).flatMap(([k, v]) => {
    const t = types.get(k);
    return t === undefined ? [`${path}.${k}`] : unknownFields(v, t, `${path}.${k}`);
  });
}

/** Throws, naming the object, when it does not validate or its kind is not one the chart may render. */
export function validateObject(o: K8sObject): void {
  const key = `${o.apiVersion}/${o.kind}`;
  const [Model, apiType] = models[key] ?? [];
  if (!Model) throw new Error(`${key} ${o.metadata?.name}: not a kind this chart renders`);
  try {
    new Model(o as never).validate();
  } catch (err) {
    throw new Error(`${key} ${o.metadata.name}: ${(err as Error).message}`, { cause: err });
  }
  const unknown = apiType ? unknownFields(o, apiType, '') : [];
  if (unknown.length) throw new Error(`${key} ${o.metadata.name}: unknown fields ${unknown.join(', ')}`);
}
