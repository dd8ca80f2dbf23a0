// The walproxy alert rules. Thresholds are starting points for S3 Express One Zone in the broker's
// zone; docs/observability.md ("Alerts") says what each means and what to do.
import type { AlertSpec } from './model.js';

/** The `job` label of the sidecars' scrape targets in the rules (the chart can substitute it). */
export const ALERT_JOB = 'walproxy';

/** The WAL group's name in the rules file. */
export const ALERT_GROUP = 'walproxy';

/**
 * Inline reasons that are not a fallback: control batches (transaction markers, never produced),
 * batches of topics that do not use the WAL (`topic_not_in_wal`: plain topics, __consumer_offsets,
 * the WAL metadata topic), that a topic's mode=inline keeps stock (`mode_inline`) or that the
 * sealing policy keeps stock while a mode=auto topic's budget group would not pay for its objects
 * (`group_inline`), and partitions the follower side asked inline for (`requested_inline`: its own
 * fallback, which the fill alerts count). `not_in_wal`, a WAL topic's batch the index does not
 * have, is a fallback.
 */
const NOT_A_FALLBACK = 'control|requested_inline|topic_not_in_wal|mode_inline|group_inline';

/**
 * The listeners that carry replication: `replication` (followers of other brokers into this one)
 * and `egress-<id>` (this broker's followers out to a peer's replication ingress). The zone
 * listeners carry clients.
 */
const REPLICATION_LISTENERS = 'replication|egress-.*';

/**
 * The walproxy container as kube-state-metrics reports it: a native sidecar (an init container
 * with restartPolicy Always, the chart's default and deploy/patch) under the init-container
 * series, a plain container under the container series; a pod has one or the other.
 */
function walproxyContainer(series: string, matchers = ''): string {
  const m = `container="walproxy"${matchers ? `,${matchers}` : ''}`;
  return `kube_pod_init_${series}{${m}} or kube_pod_${series}{${m}}`;
}

/**
 * Restarts of the walproxy container over the last 15 minutes, by pod: changes() counts them
 * whole (increase() would extrapolate 1 to 1.07), and a new pod's first minutes included.
 */
const RESTARTS_15M = `max by (namespace, pod, container) (changes(kube_pod_init_container_status_restarts_total{container="walproxy"}[15m]) or changes(kube_pod_container_status_restarts_total{container="walproxy"}[15m]))`;

/** Alert thresholds other text refers to. */
export const CERTIFICATE_WARN_DAYS = 14;

export const ALERTS: readonly AlertSpec[] = [
  {
    // `up` is 0 for a target that does not answer, and absent when there is no target at all (no
    // PodMonitor or ServiceMonitor selects the pods, every pod is gone, a relabelled job name):
    // then the absent() term is 0 too, labelled with the job only.
    alert: 'WalproxySidecarDown',
    value: () => `up{job="${ALERT_JOB}"} or on() (0 * absent(up{job="${ALERT_JOB}"}))`,
    condition: '== 0',
    for: '2m',
    severity: 'critical',
    summary:
      '{{ with $labels.instance }}walproxy sidecar {{ . }} is not answering /metrics{{ else }}No walproxy sidecar is scraped (job {{ $labels.job }}){{ end }}',
    description:
      '{{ with $labels.instance }}Prometheus cannot scrape {{ . }}. Clients and followers reach the broker only through its sidecar: check the pod and its logs.{{ else }}Prometheus has no scrape target of this job: the PodMonitor or ServiceMonitor selects no pod (metrics.podMonitor / metrics.serviceMonitor in the chart, and the Prometheus selectors), or every broker pod is gone.{{ end }}',
  },
  {
    alert: 'WalproxySidecarNotReady',
    value: () => walproxyContainer('container_status_ready'),
    condition: '== 0',
    for: '5m',
    severity: 'warning',
    summary: 'walproxy container of {{ $labels.pod }} is not ready',
    description:
      '/readyz fails: the broker does not accept connections on its CLIENT listener, or the WAL store does not take a write. The body of /readyz says which.',
  },
  {
    // A restart drops every connection through the sidecar and fences the broker until the new
    // one answers its controller path; a healthy sidecar restarts only with its pod (a new pod's
    // count starts at 0), so one restart is worth a look.
    alert: 'WalproxySidecarRestarted',
    value: () => RESTARTS_15M,
    condition: '> 0',
    for: '0m',
    severity: 'warning',
    summary: 'walproxy container of {{ $labels.pod }} restarted',
    description:
      'The walproxy container of {{ $labels.pod }} restarted ({{ $value | humanize }} in 15 minutes): clients and followers lost their connections and the broker was fenced until it came back. Its previous logs (kubectl logs --previous -c walproxy) and the last terminated reason say why; WalproxySidecarOOMKilled fires when it was the memory limit.',
  },
  {
    alert: 'WalproxySidecarOOMKilled',
    value: () =>
      `max by (namespace, pod, container) (${walproxyContainer('container_status_last_terminated_reason', 'reason="OOMKilled"')})`,
    condition: '== 1',
    // Only while the kill is recent: the last terminated reason stays until the next termination.
    onlyIf: () => `${RESTARTS_15M} > 0`,
    onlyIfOn: 'namespace, pod, container',
    for: '0m',
    severity: 'warning',
    summary: 'walproxy container of {{ $labels.pod }} was OOM-killed',
    description:
      'The walproxy container of {{ $labels.pod }} was killed at its memory limit and restarted. The sidecar bounds its caches and queues from --memory-limit-bytes (else the container limit): a limit set below what the container gets, or a rate per broker beyond it. Raise the container limit (the flag follows it), or lower the rate per broker; WalproxyMemoryNearBound warns before the next kill.',
  },
  {
    alert: 'WalproxyStoreUnhealthy',
    value: () => 'min by (instance) (walproxy_store_healthy)',
    condition: '== 0',
    for: '2m',
    severity: 'warning',
    summary: 'walproxy on {{ $labels.instance }} does not use its WAL store',
    description:
      'The sidecar judged the store unusable (failing or slow) and replicates inline: correct, but every replicated byte crosses zones until the store recovers.',
  },
  {
    alert: 'WalproxyInlineFallback',
    value: (w) =>
      `sum by (instance) (rate(walproxy_fetch_inline_batches_total{reason!~"${NOT_A_FALLBACK}"}[${w}])) / (sum by (instance) (rate(walproxy_fetch_inline_batches_total{reason!~"${NOT_A_FALLBACK}"}[${w}])) + sum by (instance) (rate(walproxy_fetch_references_total{side="leader"}[${w}])))`,
    condition: '> 0.5',
    for: '10m',
    severity: 'warning',
    summary: 'walproxy on {{ $labels.instance }} replicates WAL topics inline',
    description:
      '{{ $value | humanizePercentage }} of the batches this leader could send to followers as references go inline instead (batches missing from the WAL, the store not answering in time, broker rewrites, unknown topics, store faults). Replication is correct but crosses zones: look at the inline reasons on the dashboard.',
  },
  {
    // A store call that failed was retried (a retry) or was the object's last (a failure), so
    // retries + failures over attempts is the share of PUTs that failed. Object stores fail the odd
    // call by design (S3: retry a 500 or 503); a share, held for twice the window, lets one retry
    // now and then pass and fires on a store that keeps failing.
    alert: 'WalproxyStorePutErrors',
    value: (w) =>
      `(sum by (instance) (rate(walproxy_wal_upload_retries_total[${w}])) + sum by (instance) (rate(walproxy_wal_upload_failures_total[${w}]))) / sum by (instance) (rate(walproxy_wal_upload_attempts_total[${w}]))`,
    condition: '> 0.05',
    for: '10m',
    severity: 'warning',
    summary: 'WAL uploads from {{ $labels.instance }} fail',
    description:
      '{{ $value | humanizePercentage }} of the store calls for WAL objects fail; objects whose retries run out are not stored and their batches replicate inline. Check the store (permissions, throttling, endpoint).',
  },
  {
    alert: 'WalproxyStoreGetErrors',
    value: (w) => `sum by (instance) (rate(walproxy_fetch_fallbacks_total{reason="get_failed"}[${w}]))`,
    condition: '> 0',
    for: '5m',
    severity: 'warning',
    summary: 'WAL reads on {{ $labels.instance }} fail',
    description:
      'Follower fills fall back to inline because ranged GETs fail ({{ $value | humanize }} partitions/s). Check the store and the sidecar’s read access.',
  },
  {
    // Not a store fault: the CRC held (or the digest would not have been checked), so the object
    // was changed on purpose or by a tool that rewrites batches. The follower refused it and took
    // the batch inline, so replicas did not diverge; whoever can write that bucket must be found.
    alert: 'WalproxyFollowerDigestMismatch',
    value: (w) => `sum by (instance) (increase(walproxy_fetch_digest_mismatches_total[${w}]))`,
    condition: '> 0',
    for: '0m',
    severity: 'critical',
    summary: 'A WAL object read by {{ $labels.instance }} does not hold the batch its leader stored',
    description:
      'Follower fills refused referenced batches ({{ $value | humanize }} in the window) whose records are not the ones the leader stored (SHA-256 mismatch) and took them inline: replicas stay correct, but a referenced WAL object was overwritten. Check who can write the buckets in --wal-store-url and --wal-read-store-url (bucket policy, access logs) and any tool that rewrites objects.',
  },
  {
    alert: 'WalproxyStoreSlowPuts',
    value: (w) =>
      `histogram_quantile(0.99, sum by (instance, le) (rate(walproxy_wal_upload_attempt_duration_bucket[${w}])))`,
    condition: '> 500',
    for: '10m',
    severity: 'warning',
    summary: 'WAL PUTs from {{ $labels.instance }} are slow',
    description:
      'p99 of one store call is {{ $value | humanize }} ms. Held fetches and durable acks wait for uploads: past --max-hold-ms batches go inline.',
  },
  {
    // A fill is released at the fill deadline (250 ms by default) whatever the store does, so its
    // duration never gets far past it: the symptom of a slowing store is fills that take a large
    // part of the deadline, before they miss it (WalproxyFillDeadlineMissed). S3 Express answers
    // in single-digit milliseconds.
    alert: 'WalproxySlowFills',
    value: (w) =>
      `histogram_quantile(0.99, sum by (instance, le) (rate(walproxy_fetch_fill_duration_bucket[${w}])))`,
    condition: '> 100',
    for: '10m',
    severity: 'warning',
    summary: 'Follower fills on {{ $labels.instance }} are slow',
    description:
      'p99 of a follower fill (range GETs included) is {{ $value | humanize }} ms, near the fill deadline (--fill-deadline-ms, 250 ms by default) past which fills go inline. Slow fills delay replication: check the GET latency panel and the store.',
  },
  {
    alert: 'WalproxyFillDeadlineMissed',
    value: (w) => `sum by (instance) (rate(walproxy_fetch_deadline_misses_total[${w}]))`,
    condition: '> 0',
    for: '5m',
    severity: 'warning',
    summary: 'Follower fills on {{ $labels.instance }} miss their deadline',
    description:
      'Fills do not finish within the fill deadline ({{ $value | humanize }} partitions/s) and go inline: the store is slow for GETs.',
  },
  {
    alert: 'WalproxyDurableAckFailures',
    value: (w) => `sum by (instance) (rate(walproxy_produce_durable_ack_failures_total[${w}]))`,
    condition: '> 0',
    for: '1m',
    severity: 'critical',
    summary: 'Produces through {{ $labels.instance }} are answered REQUEST_TIMED_OUT',
    description:
      'Batches of durable-ack topics were not stored in time ({{ $value | humanize }} partitions/s); producers retry. The store is failing: see the PUT panels.',
  },
  {
    alert: 'WalproxyMetadataNotPublished',
    value: (w) =>
      `sum by (instance) (rate(walproxy_wal_metadata_overflowed_total[${w}])) + sum by (instance) (rate(walproxy_wal_metadata_send_failures_total[${w}]))`,
    condition: '> 0',
    for: '5m',
    severity: 'warning',
    summary: 'WAL metadata from {{ $labels.instance }} is not published',
    description:
      'Records for the WAL metadata topic are dropped or fail to send: a new leader cannot find those batches in the WAL after a failover (they replicate inline).',
  },
  {
    alert: 'WalproxyMemoryNearBound',
    value: () => 'max by (instance) (walproxy_memory_used_bytes / walproxy_memory_limit_bytes)',
    condition: '> 0.9',
    for: '5m',
    severity: 'warning',
    summary: 'walproxy on {{ $labels.instance }} is near its memory bound',
    description:
      'The sidecar process uses {{ $value | humanizePercentage }} of its memory limit (resident memory); past the limit the container is OOM-killed and its broker fenced. Raise the memory limit (and the container’s), or lower the rate per broker.',
  },
  {
    // The data path is one thread: a timer late by this much delays every connection's bytes,
    // every held fetch and every fill as much (long synchronous work, GC pauses, CPU throttling).
    alert: 'WalproxyEventLoopLag',
    value: () => 'max by (instance) (walproxy_event_loop_delay_p99)',
    condition: '> 100',
    for: '5m',
    severity: 'warning',
    summary: 'The event loop of walproxy on {{ $labels.instance }} runs late',
    description:
      'p99 of the event-loop delay is {{ $value | humanize }} ms: every byte through this sidecar waits as long. Check its CPU (limit and throttling) on the dashboard, and its memory (GC pauses near the bound).',
  },
  {
    // No stored upload for 5 minutes while batches wait for one: uploads that hang count no
    // failure (a frozen store), so the error rules can stay silent; this does not.
    alert: 'WalproxyUploadsStalled',
    value: () => 'max by (instance) (walproxy_wal_upload_success_age_seconds)',
    condition: '> 300',
    onlyIf: () => 'max by (instance) (walproxy_wal_pending_bytes) > 0',
    for: '2m',
    severity: 'warning',
    summary: 'No WAL object stored by {{ $labels.instance }} for {{ $value | humanizeDuration }}',
    description:
      'Batches wait to be stored and no upload has succeeded for {{ $value | humanizeDuration }}: the store does not answer or refuses every PUT. Held fetches and durable acks wait; past --max-hold-ms batches go inline.',
  },
  {
    alert: 'WalproxyGetsStalled',
    value: () => 'max by (instance) (walproxy_wal_reader_success_age_seconds)',
    condition: '> 300',
    onlyIf: (w) => `sum by (instance) (rate(walproxy_wal_reader_gets_total[${w}])) > 0`,
    for: '2m',
    severity: 'warning',
    summary: 'No GET from the store answered on {{ $labels.instance }} for {{ $value | humanizeDuration }}',
    description:
      'This follower side sends GETs and none has answered for {{ $value | humanizeDuration }}: every fill falls back inline (replication correct, crossing zones). Check the store and the sidecar’s read access.',
  },
  {
    // Kafka's UnderReplicatedPartitions as each leader's sidecar sees it in the Metadata it reads
    // for topic ids: a follower out of the ISR (behind by more than replica.lag.time.max.ms, or
    // gone). A broker restart shrinks the ISR for as long as it takes to catch up, hence `for`.
    alert: 'WalproxyUnderReplicatedPartitions',
    value: () => 'max by (instance) (walproxy_partitions_under_replicated)',
    condition: '> 0',
    for: '5m',
    severity: 'warning',
    summary:
      '{{ $value | humanize }} partitions led by the broker behind {{ $labels.instance }} are under-replicated',
    description:
      'Partitions this broker leads have fewer in-sync replicas than replicas: a follower fell behind (replica.lag.time.max.ms) or is gone. Below min.insync.replicas, acks=all produces fail. Check the followers: their brokers, their sidecars (WalproxyReplicationConnectFailures, WalproxyReplicationTlsFailures), their fills from the store (WalproxyStoreGetErrors, WalproxyFillDeadlineMissed); kafka-topics --describe --under-replicated-partitions names them.',
  },
  {
    // Connects that fail on a replication path for longer than a restart takes: a peer sidecar or
    // the local broker's REPLICATION listener that does not answer, or refuses the handshake (TLS
    // handshakes to a peer count here too). The window holds one failure for 5 minutes, the
    // `for` of 10 asks that they go on for 5 minutes more: a peer's rolling restart does not fire.
    alert: 'WalproxyReplicationConnectFailures',
    value: (w) =>
      `sum by (instance, listener) (rate(walproxy_listener_upstream_connect_failures_total{listener=~"${REPLICATION_LISTENERS}"}[${w}]))`,
    condition: '> 0',
    for: '10m',
    severity: 'warning',
    summary: 'walproxy on {{ $labels.instance }} cannot connect upstream on {{ $labels.listener }}',
    description:
      'Connections on the {{ $labels.listener }} listener fail to reach their upstream ({{ $value | humanize }}/s): on egress-<id>, the replication ingress of broker <id>’s sidecar (its pod, the peer address, a NetworkPolicy, TLS); on replication, this pod’s broker (its REPLICATION listener). Followers cannot fetch through it: its partitions fall out of the ISR. The sidecar logs `upstream unreachable` or `upstream TLS handshake failed` with the reason.',
  },
  {
    // A refused handshake on a replication path is never the healthy case: the mutual-TLS peers
    // of one cluster are issued by one CA. Refusals on the client ingress are left out (any client
    // can knock there).
    alert: 'WalproxyReplicationTlsFailures',
    value: (w) =>
      `sum by (instance, listener) (rate(walproxy_listener_tls_handshake_failures_total{listener=~"replication|zone-ingress"}[${w}]) or rate(walproxy_listener_upstream_tls_handshake_failures_total{listener=~"egress-.*|zone-egress-.*"}[${w}]))`,
    condition: '> 0',
    for: '10m',
    severity: 'warning',
    summary: 'TLS handshakes fail on {{ $labels.listener }} of {{ $labels.instance }}',
    description:
      'TLS handshakes between sidecars fail on {{ $labels.listener }} ({{ $value | humanize }}/s): an expired or not-yet-valid certificate, one from another CA, a name that does not match (--peer-tls-server-name, --peer-tls-verify-hostname) or a missing client certificate. The sidecar logs `TLS client refused: <reason>` (ingress) or `upstream TLS handshake failed: <reason>` (egress). Replication through that path stops.',
  },
  {
    alert: 'WalproxyCertificateExpiring',
    value: () => 'min by (instance, tls, file) (walproxy_tls_certificate_expiry_seconds)',
    condition: `< ${CERTIFICATE_WARN_DAYS * 86_400}`,
    for: '10m',
    severity: 'warning',
    summary:
      'A TLS certificate of {{ $labels.instance }} ({{ $labels.tls }}, {{ $labels.file }}) expires in {{ $value | humanizeDuration }}',
    description:
      'The {{ $labels.file }} file of the {{ $labels.tls }} identity holds a certificate that expires in {{ $value | humanizeDuration }} (negative: expired). Peers and clients refuse an expired certificate and replication over mutual TLS stops. Renew it: the sidecar reloads the files within a second of them changing (no restart), and this clears.',
  },
  {
    // What walproxy's replication cost beyond stock over the last hour, only where WAL objects were
    // uploaded in it: without WAL traffic there is nothing to price (an idle or all-inline cluster
    // saves exactly 0, docs/cost.md).
    alert: 'WalproxySavingNegative',
    value: () =>
      '(sum(increase(walproxy_cost_spent_total{item!="cpu_proxy"}[1h])) - sum(increase(walproxy_cost_stock_total[1h]))) and on() (sum(increase(walproxy_wal_bytes_uploaded_total[1h])) > 0)',
    condition: '> 0',
    for: '1h',
    severity: 'warning',
    summary: 'walproxy costs more than stock replication',
    description:
      'Over the last hour walproxy\'s replication cost {{ printf "%.4g" $value }} USD more than stock replication of the same bytes would have (relaying CPU not counted). mode=auto keeps groups whose objects would not pay inline; topics set to mode=wal or durable.ack=true pay for their objects whatever they cost. A longer latency.budget.ms, or mode=auto for quiet topics, lowers the cost.',
  },
];

/** The PromQL of one rule: its value over `window`, then its condition, then where it applies. */
export function alertExpr(alert: AlertSpec, window = '5m'): string {
  const expr = `(${alert.value(window)}) ${alert.condition}`;
  return alert.onlyIf ? `${expr} and on(${alert.onlyIfOn ?? 'instance'}) (${alert.onlyIf(window)})` : expr;
}
