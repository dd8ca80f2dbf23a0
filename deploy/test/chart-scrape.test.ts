// The chart wires scraping: a PodMonitor or a ServiceMonitor whose targets carry the job label the
// shipped rules select, a NetworkPolicy that keeps the unauthenticated admin port to the scrapers,
// and the trace sampler as a value. Every object validated against the Kubernetes and
// prometheus-operator API schemas offline (kubernetes-models, @kubernetes-models/prometheus-operator).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  chartDir,
  find,
  helm,
  type K8sObject,
  KUBE_VERSION,
  renderChart,
  repoRoot,
  schemaErrors,
  unknownFieldErrors,
} from './chart.js';

const ADMIN_FROM = [
  'networkPolicy.adminFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=monitoring',
  'networkPolicy.adminFrom[0].podSelector.matchLabels.app\\.kubernetes\\.io/name=prometheus',
];
const POD_MONITOR_ON = [
  'metrics.podMonitor.enabled=true',
  'metrics.podMonitor.labels.release=kube-prometheus-stack',
  'metrics.podMonitor.interval=15s',
  'metrics.prometheusRule.enabled=true',
  'metrics.prometheusRule.job=kafka-walproxy',
  'networkPolicy.enabled=true',
  ...ADMIN_FROM,
];

/** The sidecar container of the broker pods (a native sidecar: an init container). */
function sidecar(objects: K8sObject[]) {
  const pod = find(objects, 'StatefulSet', 'kafka-walproxy-broker').spec.template;
  const containers = [...(pod.spec.initContainers ?? []), ...pod.spec.containers];
  return { pod, container: containers.find((c: { name: string }) => c.name === 'walproxy') };
}

describe('the Helm chart’s scraping and admin-port policy', () => {
  it('renders no PodMonitor, ServiceMonitor or NetworkPolicy by default, and no stale advice to keep metrics off', () => {
    const kinds = renderChart().map((o) => o.kind);
    for (const kind of ['PodMonitor', 'ServiceMonitor', 'NetworkPolicy']) expect(kinds).not.toContain(kind);
    for (const file of ['values.yaml', 'templates/broker-statefulset.yaml', 'templates/_sidecar.tpl']) {
      const text = readFileSync(path.join(chartDir, file), 'utf8');
      expect(text, file).not.toMatch(/no \/metrics yet|issue 6|set and ignored/);
    }
    expect(readFileSync(path.join(repoRoot, 'docs/deploy.md'), 'utf8')).not.toMatch(
      /serves no `\/metrics` yet|set and ignored/,
    );
  });

  it('passes helm lint with the PodMonitor, the rules and the NetworkPolicy on', () => {
    const set = POD_MONITOR_ON.flatMap((s) => ['--set', s]);
    expect(helm(['lint', chartDir, '--strict', '--kube-version', KUBE_VERSION, ...set])).toContain(
      '0 chart(s) failed',
    );
  });

  describe('with the PodMonitor, the rules and the NetworkPolicy on', () => {
    const objects = renderChart({ set: POD_MONITOR_ON });
    const monitor = find(objects, 'PodMonitor', 'kafka-walproxy');
    const policy = find(objects, 'NetworkPolicy', 'kafka-walproxy-broker');
    const rule = find(objects, 'PrometheusRule', 'kafka-walproxy');

    it('validates every object against the Kubernetes and prometheus-operator schemas, with no unknown field', async () => {
      expect(await schemaErrors(objects)).toEqual([]);
      expect(unknownFieldErrors(objects)).toEqual([]);
    });

    it('fails those checks for a broken PodMonitor and NetworkPolicy (they are not vacuous)', async () => {
      const badMonitor = structuredClone(monitor);
      badMonitor.spec.podMetricsEndpoints[0].port = 9180;
      const badPolicy = structuredClone(policy);
      badPolicy.spec.ingress[0].ports[0].protocol = 'ICMP';
      const unknownField = structuredClone(policy);
      unknownField.spec.ingress[0].fromPods = [];
      expect((await schemaErrors([badMonitor, badPolicy])).join('\n')).toMatch(
        /PodMonitor\/kafka-walproxy: .*port[\s\S]*NetworkPolicy\/kafka-walproxy-broker: .*protocol/,
      );
      expect(unknownFieldErrors([unknownField]).join('\n')).toMatch(/'"fromPods"' does not exist/);
    });

    it('scrapes /metrics on the sidecar’s admin port of exactly the broker pods, with the job label the rules select', () => {
      const { pod, container } = sidecar(objects);
      expect(monitor.metadata.labels).toMatchObject({ release: 'kube-prometheus-stack' });
      expect(monitor.spec.namespaceSelector).toEqual({ matchNames: ['streaming'] });
      expect(pod.metadata.labels).toMatchObject(monitor.spec.selector.matchLabels);
      const controllerPod = find(objects, 'StatefulSet', 'kafka-walproxy-controller').spec.template;
      expect(controllerPod.metadata.labels).not.toMatchObject(monitor.spec.selector.matchLabels);
      const [endpoint] = monitor.spec.podMetricsEndpoints;
      expect(endpoint).toMatchObject({ port: 'admin', path: '/metrics', interval: '15s' });
      expect(container.ports).toContainEqual(expect.objectContaining({ name: 'admin', containerPort: 9180 }));
      expect(endpoint.relabelings).toEqual([
        { action: 'replace', targetLabel: 'job', replacement: 'kafka-walproxy' },
      ]);
      const down = rule.spec.groups[0].rules.find(
        (r: { alert: string }) => r.alert === 'WalproxySidecarDown',
      );
      expect(down.expr).toContain('up{job="kafka-walproxy"}');
    });

    it('lets only adminFrom reach the admin port, only broker pods the replication ingress, anyone the client ingress', () => {
      const { pod } = sidecar(objects);
      expect(policy.spec.policyTypes).toEqual(['Ingress']);
      expect(pod.metadata.labels).toMatchObject(policy.spec.podSelector.matchLabels);
      const rule = (port: number) =>
        policy.spec.ingress.filter((r: { ports: Array<{ port: number }> }) =>
          r.ports.some((p) => p.port === port),
        );
      expect(rule(9192)).toEqual([{ ports: [{ port: 9192, protocol: 'TCP' }] }]);
      expect(rule(9193)).toEqual([
        { ports: [{ port: 9193, protocol: 'TCP' }], from: [{ podSelector: policy.spec.podSelector }] },
      ]);
      expect(rule(9180)).toEqual([
        {
          ports: [{ port: 9180, protocol: 'TCP' }],
          from: [
            {
              namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
              podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
            },
          ],
        },
      ]);
    });
  });

  it('leaves the admin port closed to everyone with an empty adminFrom', () => {
    const policy = find(
      renderChart({ set: ['networkPolicy.enabled=true'] }),
      'NetworkPolicy',
      'kafka-walproxy-broker',
    );
    expect(
      policy.spec.ingress.flatMap((r: { ports: Array<{ port: number }> }) => r.ports.map((p) => p.port)),
    ).toEqual([9192, 9193]);
  });

  it('renders a valid ServiceMonitor over the headless Service’s admin port instead, and refuses both monitors at once', async () => {
    const objects = renderChart({ set: ['metrics.serviceMonitor.enabled=true'] });
    const monitor = find(objects, 'ServiceMonitor', 'kafka-walproxy');
    expect(await schemaErrors([monitor])).toEqual([]);
    expect(unknownFieldErrors([monitor])).toEqual([]);
    const services = objects.filter(
      (o) =>
        o.kind === 'Service' &&
        Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => o.metadata.labels?.[k] === v),
    );
    expect(services.map((s) => s.metadata.name)).toEqual(['kafka-walproxy-broker-headless']);
    expect(services[0]!.spec.ports).toContainEqual(expect.objectContaining({ name: 'admin', port: 9180 }));
    expect(monitor.spec.endpoints[0]).toMatchObject({
      port: 'admin',
      path: '/metrics',
      relabelings: [{ action: 'replace', targetLabel: 'job', replacement: 'walproxy' }],
    });
    expect(() =>
      renderChart({ set: ['metrics.serviceMonitor.enabled=true', 'metrics.podMonitor.enabled=true'] }),
    ).toThrow(/both enabled: each sidecar would be scraped twice/);
  });

  it('sets the trace sampler from walproxy.tracing when OTLP export is on', () => {
    const env = (set: string[]) =>
      Object.fromEntries(
        sidecar(renderChart({ set })).container.env.map((e: { name: string; value?: string }) => [
          e.name,
          e.value,
        ]),
      );
    const on = env(['walproxy.otlpEndpoint=http://otel-collector.observability:4318']);
    expect(on).toMatchObject({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector.observability:4318',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.01',
    });
    const always = env([
      'walproxy.otlpEndpoint=http://otel-collector.observability:4318',
      'walproxy.tracing.sampler=always_on',
      'walproxy.tracing.samplerArg=',
    ]);
    expect(always.OTEL_TRACES_SAMPLER).toBe('always_on');
    expect(always).not.toHaveProperty('OTEL_TRACES_SAMPLER_ARG');
    expect(env([])).not.toHaveProperty('OTEL_TRACES_SAMPLER');
  });
});
