import { describe, expect, it } from 'vitest';
import {
  chartDir,
  find,
  helm,
  KUBE_VERSION,
  renderChart,
  schemaErrors,
  unknownFieldErrors,
} from './chart.js';

const VARIANTS: Record<string, { valuesFiles?: string[]; set?: string[] }> = {
  'default values': {},
  'three-zone S3 Express values': { valuesFiles: ['values-s3express-3az.yaml'] },
  'plain sidecar container, no rack, no persistence, scraping on': {
    set: [
      'walproxy.nativeSidecar=false',
      'brokers.rack.enabled=false',
      'brokers.persistence.enabled=false',
      'controllers.persistence.enabled=false',
      'metrics.prometheusAnnotations=true',
      'walproxy.wal.storeUrl=s3://bucket/prefix',
      'walproxy.wal.topics={a,b*}',
    ],
  },
};

describe('the Helm chart', () => {
  it('passes helm lint with default and three-zone values', () => {
    for (const values of [[], ['-f', `${chartDir}/values-s3express-3az.yaml`]]) {
      const out = helm(['lint', chartDir, '--strict', '--kube-version', KUBE_VERSION, ...values]);
      expect(out).toContain('0 chart(s) failed');
    }
  });

  for (const [name, variant] of Object.entries(VARIANTS)) {
    describe(`rendered with ${name}`, () => {
      const objects = renderChart(variant);

      it('renders the whole deployment', () => {
        const kinds = objects.map((o) => `${o.kind}/${o.metadata.name}`).sort();
        expect(kinds).toEqual(
          expect.arrayContaining([
            'ConfigMap/kafka-walproxy-config',
            'PodDisruptionBudget/kafka-walproxy-broker',
            'PodDisruptionBudget/kafka-walproxy-controller',
            'Service/kafka-walproxy-bootstrap',
            'Service/kafka-walproxy-broker-headless',
            'Service/kafka-walproxy-controller-headless',
            'ServiceAccount/kafka-walproxy',
            'StatefulSet/kafka-walproxy-broker',
            'StatefulSet/kafka-walproxy-controller',
          ]),
        );
        // The node lookup's RBAC exists exactly when racks are on.
        const rbac = kinds.filter((k) => k.startsWith('ClusterRole'));
        expect(rbac).toHaveLength(variant.set?.includes('brokers.rack.enabled=false') ? 0 : 2);
      });

      it('validates every object against the Kubernetes API schemas (offline)', async () => {
        expect(await schemaErrors(objects)).toEqual([]);
      });

      it('uses no field the Kubernetes API types do not declare', () => {
        expect(unknownFieldErrors(objects)).toEqual([]);
      });
    });
  }

  it('refuses values that would break the wiring, with one line naming the value', () => {
    const refused: Array<[string[], RegExp]> = [
      [
        ['brokers.config.advertised\\.listeners=PLAINTEXT://x:1'],
        /brokers.config.advertised.listeners is set by the chart/,
      ],
      [['walproxy.wal.topics={orders}'], /need walproxy.wal.storeUrl/],
      [
        ['brokers.rack.enabled=false', 'walproxy.wal.storeUrlByZone.a=s3://b/p'],
        /needs brokers.rack.enabled/,
      ],
      [['controllers.nodeIdBase=2'], /nodeIdBase must be at least brokers.replicas/],
      [['walproxy.ports.egressBase=65534'], /egressBase \+ brokers.replicas/],
      [['kafka.clusterId=not-an-id'], /kafka.clusterId must be 22 characters/],
      [
        ['walproxy.ports.controllerBase=18900'],
        /controllerBase \+ the controller ids overlap the egress ports/,
      ],
      [['walproxy.ports.controllerBase=65500'], /controllerBase \+ controllers.nodeIdBase/],
      [['walproxy.resources.limits.memory=lots'], /walproxy.resources.limits.memory "lots"/],
    ];
    for (const [set, message] of refused) expect(() => renderChart({ set }), set.join(' ')).toThrow(message);
  });

  it('the schema checks catch a broken object (they are not vacuous)', async () => {
    const objects = renderChart();
    const sts = structuredClone(find(objects, 'StatefulSet', 'kafka-walproxy-broker'));
    sts.spec.template.spec.containers[0].imagePullPolicy = 'Sometimes';
    delete sts.spec.selector;
    sts.spec.template.spec.containers[0].readinessProbe.periodSecond = 5;
    expect((await schemaErrors([sts])).join('\n')).toMatch(/selector|imagePullPolicy/);
    expect(unknownFieldErrors([sts]).join('\n')).toMatch(/periodSecond/);
  });
});
