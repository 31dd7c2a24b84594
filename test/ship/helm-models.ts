// Rendered chart objects checked against the Kubernetes API schemas: each kubernetes-models class
// validates its input (types, required fields, enums); the Prometheus Operator's CRDs likewise.
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import { PrometheusRule, ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';

export interface K8sObject { apiVersion: string; kind: string; metadata: { name: string; [k: string]: unknown }; [k: string]: unknown }

interface Model { validate(): void }
const models: Record<string, new (data: never) => Model> = {
  'apps/v1/Deployment': Deployment,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/Ingress': Ingress,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
};

/** Throws, naming the object, when it does not validate or its kind is not one the chart may render. */
export function validateObject(o: K8sObject): void {
  const key = `${o.apiVersion}/${o.kind}`;
  const Model = models[key];
  if (!Model) throw new Error(`${key} ${o.metadata?.name}: not a kind this chart renders`);
  try {
    new Model(o as never).validate();
  } catch (err) {
    throw new Error(`${key} ${o.metadata.name}: ${(err as Error).message}`);
  }
}
