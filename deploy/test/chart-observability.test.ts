import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import {
  chartDir,
  find,
  helm,
  KUBE_VERSION,
  renderChart,
  repoRoot,
  schemaErrors,
  unknownFieldErrors,
} from './chart.js';

const ON = ['metrics.grafanaDashboard.enabled=true', 'metrics.prometheusRule.enabled=true'];
const dashboardFile = path.join(repoRoot, 'deploy/observability/walproxy-dashboard.json');
const rulesFile = path.join(repoRoot, 'deploy/observability/walproxy-alerts.yaml');

function hasPromtool(): boolean {
  try {
    execFileSync('promtool', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('the Helm chart’s dashboard and alert rules', () => {
  it('renders neither by default (the PrometheusRule needs prometheus-operator’s CRDs)', () => {
    const kinds = renderChart().map((o) => `${o.kind}/${o.metadata.name}`);
    expect(kinds).not.toContain('ConfigMap/kafka-walproxy-grafana-dashboard');
    expect(kinds.filter((k) => k.startsWith('PrometheusRule/'))).toEqual([]);
  });

  it('passes helm lint with both on', () => {
    const set = ON.flatMap((s) => ['--set', s]);
    expect(helm(['lint', chartDir, '--strict', '--kube-version', KUBE_VERSION, ...set])).toContain(
      '0 chart(s) failed',
    );
  });

  describe('with both on', () => {
    const objects = renderChart({
      set: [
        ...ON,
        'metrics.grafanaDashboard.namespace=monitoring',
        'metrics.grafanaDashboard.annotations.grafana_folder=Kafka',
        'metrics.prometheusRule.labels.release=kube-prometheus-stack',
      ],
    });
    const dashboard = find(objects, 'ConfigMap', 'kafka-walproxy-grafana-dashboard');
    const rule = find(objects, 'PrometheusRule', 'kafka-walproxy');

    it('validates the ConfigMap and the PrometheusRule against their API schemas, with no unknown field', async () => {
      expect(await schemaErrors([dashboard, rule])).toEqual([]);
      expect(unknownFieldErrors([dashboard, rule])).toEqual([]);
    });

    it('ships the generated dashboard in a ConfigMap labelled for the Grafana sidecar', () => {
      expect(dashboard.metadata.namespace).toBe('monitoring');
      expect(dashboard.metadata.labels).toMatchObject({ grafana_dashboard: '1' });
      expect((dashboard.metadata as { annotations?: unknown }).annotations).toEqual({
        grafana_folder: 'Kafka',
      });
      expect(JSON.parse(dashboard.data['walproxy-dashboard.json'])).toEqual(
        JSON.parse(readFileSync(dashboardFile, 'utf8')),
      );
    });

    it('ships the generated rules in the PrometheusRule, labelled for the Prometheus’ rule selector', () => {
      expect(rule.metadata.labels).toMatchObject({ release: 'kube-prometheus-stack' });
      expect(rule.spec).toEqual(parse(readFileSync(rulesFile, 'utf8')));
    });
  });

  it('selects the sidecars by the job label it is given', () => {
    const rule = find(
      renderChart({ set: [...ON, 'metrics.prometheusRule.job=streaming/kafka-walproxy'] }),
      'PrometheusRule',
      'kafka-walproxy',
    );
    const rules = rule.spec.groups.flatMap((g: { rules: Array<{ alert: string; expr: string }> }) => g.rules);
    expect(rules.find((r: { alert: string }) => r.alert === 'WalproxySidecarDown').expr).toBe(
      '(up{job="streaming/kafka-walproxy"} or on() (0 * absent(up{job="streaming/kafka-walproxy"}))) == 0',
    );
    expect(JSON.stringify(rules)).not.toContain('job="walproxy"');
  });

  it.skipIf(!hasPromtool())(
    'renders rules that pass `promtool check rules` (skipped only without promtool)',
    () => {
      const rule = find(renderChart({ set: ON }), 'PrometheusRule', 'kafka-walproxy');
      const dir = mkdtempSync(path.join(tmpdir(), 'walproxy-chart-rules-'));
      try {
        const file = path.join(dir, 'rules.yaml');
        writeFileSync(file, stringify(rule.spec));
        expect(execFileSync('promtool', ['check', 'rules', file], { encoding: 'utf8' })).toContain('SUCCESS');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
