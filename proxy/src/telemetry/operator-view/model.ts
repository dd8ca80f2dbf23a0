// The operator's view as data: the dashboard's panels and the alert rules are declared once, here,
// next to the metrics they read (../metrics.ts), and rendered to a Grafana dashboard (grafana.ts)
// and a Prometheus rules file (prometheus-rules.ts) by generate.ts. The e2e test
// (e2e/test/operator-view.test.ts) evaluates every query below against a real Prometheus scraping
// a running cluster, so a renamed metric fails a test instead of leaving an empty panel.

/** One PromQL query of a panel. Template variables: `$job`, `$instance`, `$__rate_interval`. */
export interface PanelQuery {
  expr: string;
  /** Grafana legend format (`{{label}}` placeholders). */
  legend: string;
  /** A unit other than the panel's: this query is drawn against a right-hand axis. */
  unit?: string;
}

export interface PanelSpec {
  title: string;
  /** What the panel shows and what to do when it looks wrong: the operator reads it as a tooltip. */
  description: string;
  kind: 'timeseries' | 'stat';
  /** Grafana unit id: `Bps`, `bytes`, `ms`, `percentunit`, `ops`, `reqps`, `currencyUSD`, `short`. */
  unit: string;
  queries: PanelQuery[];
  /** Grid columns out of 24 (default: 8 for time series, 6 for stats). */
  width?: number;
  /** Stat panels: value at or above which the panel turns red (green below). */
  redFrom?: number;
  /** Stat panels: value below which the panel turns red (green at or above). */
  redBelow?: number;
}

export interface RowSpec {
  title: string;
  panels: PanelSpec[];
}

/**
 * One alert. `value` is the measured quantity (it returns series whenever the sidecars are
 * scraped: the e2e test checks that), `condition` the comparison that makes it fire; the rule's
 * expression is `(value) condition`. `value` takes the rate window, so the same rule can be
 * evaluated over a short window in a test.
 */
export interface AlertSpec {
  alert: string;
  value: (window: string) => string;
  condition: string;
  /**
   * Where the rule applies at all (a PromQL filter over the same `instance`s, or `onlyIfOn`): the
   * rule's expression becomes `(value) condition and on(instance) (onlyIf)`. `value` alone still
   * returns series on any scraped sidecar.
   */
  onlyIf?: (window: string) => string;
  /** The labels `onlyIf` is joined on; default `instance` (series of a sidecar). */
  onlyIfOn?: string;
  /** How long the condition must hold (Prometheus duration). */
  for: string;
  severity: 'critical' | 'warning';
  summary: string;
  /** May use `{{ $labels.<name> }}` and `{{ $value }}` (Prometheus alert templating). */
  description: string;
}

/** `{job=~"$job",instance=~"$instance",<matchers>}`: the dashboard's target filter, plus `matchers`. */
export function sel(matchers = ''): string {
  const base = 'job=~"$job",instance=~"$instance"';
  return `{${matchers ? `${base},${matchers}` : base}}`;
}

/** Per-second rate of a counter over the dashboard's rate interval. */
export function rate(metric: string, matchers = ''): string {
  return `rate(${metric}${sel(matchers)}[$__rate_interval])`;
}

/** A quantile of a histogram (`<name>_bucket`), over every selected sidecar, or `by` labels. */
export function quantile(q: number, histogram: string, by = ''): string {
  const labels = by ? `${by}, le` : 'le';
  return `histogram_quantile(${q}, sum by (${labels}) (${rate(`${histogram}_bucket`)}))`;
}

/** The metric names (`walproxy_*`, and `up`) a PromQL expression reads. */
export function metricsIn(expr: string): string[] {
  const names = new Set<string>();
  for (const match of expr.matchAll(/\b(walproxy_[a-z0-9_]+|up|kube_[a-z0-9_]+)\s*(?=[{[)\s]|$)/g)) {
    names.add(match[1]!);
  }
  return [...names];
}
