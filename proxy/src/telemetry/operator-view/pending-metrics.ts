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
  kube_pod_container_status_restarts_total:
    'kube-state-metrics in Kubernetes (restarts of a plain sidecar container): the e2e runs no Kubernetes',
  kube_pod_init_container_status_restarts_total:
    'kube-state-metrics in Kubernetes (restarts of a native sidecar): the e2e runs no Kubernetes',
  kube_pod_container_status_last_terminated_reason:
    'kube-state-metrics in Kubernetes (why a plain sidecar container last ended): the e2e runs no Kubernetes',
  kube_pod_init_container_status_last_terminated_reason:
    'kube-state-metrics in Kubernetes (why a native sidecar last ended): the e2e runs no Kubernetes',
};

/**
 * Metrics a sidecar exports only where it is configured for them, which the shared e2e cluster is
 * not: the tests that read every query against it skip these, as the external ones.
 */
export const OPTIONAL_METRICS: Readonly<Record<string, string>> = {
  walproxy_tls_certificate_expiry_seconds:
    'only on a sidecar with TLS files (--client-tls-*, --replication-tls-*, --peer-tls-*, --metadata-tls-*): the shared e2e cluster runs plaintext',
};
