// Metrics the dashboard and the alert rules read that no sidecar exports yet: the queries are
// written against the names the open issues give, and the e2e test skips exactly these (with the
// reason below). Remove an entry when its metric lands; the test then checks it on /metrics.
export const PENDING_METRICS: Readonly<Record<string, string>> = {};

/**
 * Series that come from outside the sidecars: the e2e cluster has them or not for reasons other
 * than walproxy, so the test checks them only where it can.
 */
export const EXTERNAL_METRICS: Readonly<Record<string, string>> = {
  up: 'Prometheus’ own per-target series: present in the e2e (a real Prometheus scrapes), never on /metrics',
  kube_pod_container_status_ready:
    'kube-state-metrics in Kubernetes (the sidecar’s /readyz as the kubelet sees it): the e2e runs no Kubernetes',
  kube_pod_init_container_status_ready:
    'kube-state-metrics in Kubernetes, for a native sidecar (an init container with restartPolicy Always): the e2e runs no Kubernetes',
};
