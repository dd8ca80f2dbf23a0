// Renders ALERTS as a Prometheus rules file (the `groups:` document `promtool check rules` reads,
// and the `spec` of a prometheus-operator PrometheusRule).
import { stringify } from 'yaml';
import { ALERT_GROUP, ALERTS, alertExpr } from './alerts.js';
import type { AlertSpec } from './model.js';

export interface RuleOptions {
  /** Rate window of every rule (default 5m). */
  window?: string;
  /** Overrides every rule's `for` (tests: seconds instead of minutes). */
  for?: string;
  /** Evaluation interval of the group (default: Prometheus' global one). */
  interval?: string;
  /** Only these alerts (default: all). */
  only?: readonly string[];
}

export interface RuleGroups {
  groups: Array<{
    name: string;
    interval?: string;
    rules: Array<{
      alert: string;
      expr: string;
      for: string;
      labels: Record<string, string>;
      annotations: Record<string, string>;
    }>;
  }>;
}

function rule(alert: AlertSpec, options: RuleOptions): RuleGroups['groups'][number]['rules'][number] {
  return {
    alert: alert.alert,
    expr: alertExpr(alert, options.window),
    for: options.for ?? alert.for,
    labels: { severity: alert.severity },
    annotations: { summary: alert.summary, description: alert.description },
  };
}

export function prometheusRules(options: RuleOptions = {}): RuleGroups {
  const alerts = options.only ? ALERTS.filter((a) => options.only!.includes(a.alert)) : ALERTS;
  return {
    groups: [
      {
        name: ALERT_GROUP,
        ...(options.interval ? { interval: options.interval } : {}),
        rules: alerts.map((a) => rule(a, options)),
      },
    ],
  };
}

export function prometheusRulesYaml(options: RuleOptions = {}): string {
  return stringify(prometheusRules(options), { lineWidth: 0 });
}
