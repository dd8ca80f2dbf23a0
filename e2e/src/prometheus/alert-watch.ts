// Watching the alerts of a real Prometheus (prometheus-server.ts) through a fault: when a named
// alert goes firing, when it is gone again, and everything pending or firing over a period.
import type { PromAlert, PrometheusServer } from './prometheus-server.js';

/** How often the helpers below read /api/v1/alerts: part of every bound a test measures. */
export const ALERT_POLL_MS = 500;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function describeAlert(a: PromAlert): string {
  const labels = Object.entries(a.labels)
    .filter(([k]) => k !== 'alertname' && k !== 'severity')
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  return `${a.labels.alertname}{${labels}} ${a.state} (${a.value})`;
}

/** The alerts named `name` that are pending or firing now. */
export async function active(prometheus: PrometheusServer, name: string): Promise<PromAlert[]> {
  return (await prometheus.alerts()).filter((a) => a.labels.alertname === name);
}

export interface Timed {
  /** Milliseconds from `since` to the first poll that saw the state; undefined: not within the wait. */
  ms?: number;
  /** Every alert pending or firing at that poll (or at the last poll, when it never came). */
  alerts: PromAlert[];
}

/**
 * Polls until `name` is firing on some series (and, with `where`, on one it accepts), for at most
 * `waitMs` after `since`. The wait is longer than the bound a test asserts, so that a late alert
 * shows its time instead of a bare timeout.
 */
export async function untilFiring(
  prometheus: PrometheusServer,
  name: string,
  { since, waitMs, where = () => true }: { since: number; waitMs: number; where?: (a: PromAlert) => boolean },
): Promise<Timed> {
  let alerts: PromAlert[] = [];
  for (;;) {
    alerts = await prometheus.alerts();
    if (alerts.some((a) => a.labels.alertname === name && a.state === 'firing' && where(a))) {
      return { ms: Date.now() - since, alerts };
    }
    if (Date.now() - since > waitMs) return { alerts };
    await sleep(ALERT_POLL_MS);
  }
}

/** Polls until no series of `name` is pending or firing, for at most `waitMs` after `since`. */
export async function untilCleared(
  prometheus: PrometheusServer,
  name: string,
  { since, waitMs }: { since: number; waitMs: number },
): Promise<Timed> {
  let alerts: PromAlert[] = [];
  for (;;) {
    alerts = await prometheus.alerts();
    if (!alerts.some((a) => a.labels.alertname === name)) return { ms: Date.now() - since, alerts };
    if (Date.now() - since > waitMs) return { alerts };
    await sleep(ALERT_POLL_MS);
  }
}

/**
 * Every alert seen pending or firing at any poll until `until()` says stop, by alertname and
 * labels (the first sighting of each, with the seconds since the watch began).
 */
export async function watchAlerts(
  prometheus: PrometheusServer,
  until: () => boolean,
): Promise<{ polls: number; seen: Map<string, { alert: PromAlert; atS: number }> }> {
  const started = Date.now();
  const seen = new Map<string, { alert: PromAlert; atS: number }>();
  let polls = 0;
  while (!until()) {
    for (const alert of await prometheus.alerts()) {
      const key = describeAlert({ ...alert, state: 'pending', value: '' });
      if (!seen.has(key)) seen.set(key, { alert, atS: Math.round((Date.now() - started) / 1000) });
    }
    polls++;
    await sleep(ALERT_POLL_MS * 4);
  }
  return { polls, seen };
}
