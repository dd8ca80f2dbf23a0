// The walproxy Grafana dashboard, row by row. Every query filters by the dashboard's `job` and
// `instance` variables; rates use Grafana's `$__rate_interval`. Metric names are the Prometheus
// names of ../metrics.ts (dots → `_`, counters `_total`, histograms `_bucket`); names that do not
// exist yet are listed in pending-metrics.ts.
import { type PanelSpec, quantile, type RowSpec, rate, sel } from './model.js';

const p50p99 = (histogram: string, what: string): PanelSpec['queries'] => [
  { expr: quantile(0.5, histogram), legend: `${what} p50` },
  { expr: quantile(0.99, histogram), legend: `${what} p99` },
];

const overview: RowSpec = {
  title: 'Overview',
  panels: [
    {
      title: 'Sidecars up',
      description:
        'Scrape targets answering /metrics. Fewer than the brokers: a sidecar is down, and its broker is unreachable to clients.',
      kind: 'stat',
      unit: 'short',
      queries: [{ expr: `sum(up${sel()})`, legend: 'up' }],
    },
    {
      title: 'Replicated bytes kept off the network',
      description:
        'Leader side: the share of follower-fetch record bytes sent as references (read back from the zonal store) instead of inline. Falling: look at the inline reasons below.',
      kind: 'stat',
      unit: 'percentunit',
      redBelow: 0.5,
      queries: [
        {
          expr: `sum(${rate('walproxy_replication_bytes_total', 'side="leader",path="referenced"')}) / sum(${rate('walproxy_replication_bytes_total', 'side="leader"')})`,
          legend: 'referenced',
        },
      ],
    },
    {
      title: 'Store healthy',
      description:
        'Per sidecar: 1 while the WAL store may be used, 0 while the sidecar has fallen back to inline replication because the store fails or is slow.',
      kind: 'stat',
      unit: 'short',
      redBelow: 1,
      queries: [{ expr: `min by (instance) (walproxy_store_healthy${sel()})`, legend: '{{instance}}' }],
    },
    {
      title: 'Net saving',
      description:
        "Dollars per hour: what stock replication of the replicated bytes would cost minus what walproxy's replication spent (store requests, storage, cross-zone residue, the WAL path's CPU), priced from each sidecar's counters (docs/cost.md, what a saving is; relaying CPU is not in it). Negative: walproxy costs more than stock replication at this rate.",
      kind: 'stat',
      unit: 'currencyUSD',
      redBelow: 0,
      queries: [
        {
          expr: `3600 * (sum(${rate('walproxy_cost_stock_total')}) - sum(${rate('walproxy_cost_spent_total', 'item!="cpu_proxy"')}))`,
          legend: 'saved per hour',
        },
      ],
    },
  ],
};

const listeners: RowSpec = {
  title: 'Listeners',
  panels: [
    {
      title: 'Bytes in, per listener',
      description:
        'Bytes from downstream (clients on `client`, follower brokers on `replication`, this broker on `egress-<id>`).',
      kind: 'timeseries',
      unit: 'Bps',
      queries: [
        {
          expr: `sum by (instance, listener) (${rate('walproxy_listener_bytes_total', 'direction="from_downstream"')})`,
          legend: '{{instance}} {{listener}}',
        },
      ],
    },
    {
      title: 'Bytes out, per listener',
      description:
        'Bytes to downstream, after the filters: on `replication` the follower fetch answers as sent (references are small).',
      kind: 'timeseries',
      unit: 'Bps',
      queries: [
        {
          expr: `sum by (instance, listener) (${rate('walproxy_listener_bytes_total', 'direction="to_downstream"')})`,
          legend: '{{instance}} {{listener}}',
        },
      ],
    },
    {
      title: 'Requests by API',
      description: 'Kafka requests forwarded or answered, by API name.',
      kind: 'timeseries',
      unit: 'reqps',
      queries: [
        {
          expr: `sum by (listener, api) (${rate('walproxy_requests_total')})`,
          legend: '{{listener}} {{api}}',
        },
      ],
    },
    {
      title: 'Open connections',
      description: 'Downstream connections open now, by listener.',
      kind: 'timeseries',
      unit: 'short',
      queries: [
        {
          expr: `sum by (instance, listener) (walproxy_connections_active${sel()})`,
          legend: '{{instance}} {{listener}}',
        },
      ],
    },
    {
      title: 'Listener errors',
      description:
        'Connections closed for a protocol error, failed connects to the broker, TLS handshakes refused. Upstream connect failures: the broker is not listening.',
      kind: 'timeseries',
      unit: 'ops',
      queries: [
        {
          expr: `sum by (instance) (${rate('walproxy_listener_protocol_errors_total')})`,
          legend: '{{instance}} protocol',
        },
        {
          expr: `sum by (instance) (${rate('walproxy_listener_upstream_connect_failures_total')})`,
          legend: '{{instance}} upstream connect',
        },
        {
          expr: `sum by (instance) (${rate('walproxy_listener_tls_handshake_failures_total')})`,
          legend: '{{instance}} TLS',
        },
      ],
    },
  ],
};

const replication: RowSpec = {
  title: 'Replication: references and inline',
  panels: [
    {
      title: 'Replicated bytes: referenced vs inline',
      description:
        'Follower-fetch record bytes. Leader side: sent as references or inline; follower side: filled from the store or arrived inline. Inline bytes crossed zones.',
      kind: 'timeseries',
      unit: 'Bps',
      queries: [
        {
          expr: `sum by (side, path) (${rate('walproxy_replication_bytes_total')})`,
          legend: '{{side}} {{path}}',
        },
      ],
    },
    {
      title: 'Inline batches by reason (leader side)',
      description:
        "Why batches of follower fetches went inline: `control`, `topic_not_in_wal` (topics that do not use the WAL), `mode_inline` (topics set to mode=inline) and `group_inline` (mode=auto topics whose budget group replicates inline: the sealing policy) are by design, `requested_inline` follows a fill fallback; `not_in_wal` (a WAL topic's batch missing from the WAL), `not_stored_in_time`, `rewritten_by_broker` and store reasons mean the WAL path is not carrying a WAL topic.",
      kind: 'timeseries',
      unit: 'ops',
      queries: [
        { expr: `sum by (reason) (${rate('walproxy_fetch_inline_batches_total')})`, legend: '{{reason}}' },
      ],
    },
    {
      title: 'Fill fallbacks by reason (follower side)',
      description:
        'Partitions whose references could not be filled and asked the leader for inline bytes: `get_failed` is the store; CRC or length mismatches are never accepted.',
      kind: 'timeseries',
      unit: 'ops',
      queries: [
        { expr: `sum by (reason) (${rate('walproxy_fetch_fallbacks_total')})`, legend: '{{reason}}' },
      ],
    },
    {
      title: 'Produce data not copied to the WAL',
      description: 'Produced data forwarded without a WAL copy (replicated inline), by reason.',
      kind: 'timeseries',
      unit: 'ops',
      queries: [
        { expr: `sum by (reason) (${rate('walproxy_produce_not_copied_total')})`, legend: '{{reason}}' },
      ],
    },
    {
      title: 'Durable ack: wait and failures',
      description:
        'How long Produce responses waited after the broker answered until their batches were stored, and partitions answered REQUEST_TIMED_OUT because they were not.',
      kind: 'timeseries',
      unit: 'ms',
      queries: [
        ...p50p99('walproxy_produce_durable_ack_duration', 'wait'),
        {
          expr: `sum(${rate('walproxy_produce_durable_ack_failures_total')})`,
          legend: 'failed partitions/s',
          unit: 'ops',
        },
      ],
    },
    {
      title: 'Under-replicated partitions',
      description:
        "Partitions each sidecar's broker leads whose ISR is smaller than their replica set, from the Metadata the sidecar reads every 30 s (Kafka's UnderReplicatedPartitions). Above 0 for minutes: a follower fell behind or is gone (WalproxyUnderReplicatedPartitions).",
      kind: 'timeseries',
      unit: 'short',
      queries: [
        { expr: `max by (instance) (walproxy_partitions_under_replicated${sel()})`, legend: '{{instance}}' },
      ],
    },
    {
      title: 'Replication path failures',
      description:
        "Failed connects upstream on the replication listeners (replication: this pod's broker; egress-<id>: broker <id>'s sidecar), and TLS handshakes that failed between sidecars. Any that lasts: followers cannot fetch through that path.",
      kind: 'timeseries',
      unit: 'ops',
      queries: [
        {
          expr: `sum by (instance, listener) (${rate('walproxy_listener_upstream_connect_failures_total', 'listener=~"replication|egress-.*"')})`,
          legend: '{{instance}} {{listener}} connect',
        },
        {
          expr: `sum by (instance, listener) (${rate('walproxy_listener_tls_handshake_failures_total', 'listener=~"replication|zone-ingress"')})`,
          legend: '{{instance}} {{listener}} TLS refused',
        },
        {
          expr: `sum by (instance, listener) (${rate('walproxy_listener_upstream_tls_handshake_failures_total', 'listener=~"egress-.*|zone-egress-.*"')})`,
          legend: '{{instance}} {{listener}} TLS to peer',
        },
      ],
    },
    {
      title: 'Certificates: time left',
      description:
        'Time until the earliest certificate of each TLS file a sidecar loaded expires, by identity and file (cert, ca). The sidecar reloads renewed files within a second; below 14 days WalproxyCertificateExpiring fires.',
      kind: 'timeseries',
      unit: 's',
      queries: [
        {
          expr: `min by (instance, tls, file) (walproxy_tls_certificate_expiry_seconds${sel()})`,
          legend: '{{instance}} {{tls}} {{file}}',
        },
      ],
    },
  ],
};

const store: RowSpec = {
  title: 'WAL objects and the store',
  panels: [
    {
      title: 'WAL objects stored',
      description: 'Objects and bytes stored per second (each object is one PUT).',
      kind: 'timeseries',
      unit: 'ops',
      queries: [
        {
          expr: `sum by (instance) (${rate('walproxy_wal_objects_uploaded_total')})`,
          legend: '{{instance}} objects/s',
        },
      ],
    },
    {
      title: 'WAL object size',
      description: 'Sealed object size. Small objects mean many PUTs per byte: a longer linger raises it.',
      kind: 'timeseries',
      unit: 'bytes',
      queries: p50p99('walproxy_wal_object_size', 'size'),
    },
    {
      title: 'PUT latency (one store call)',
      description: 'Duration of each upload attempt against the store.',
      kind: 'timeseries',
      unit: 'ms',
      queries: p50p99('walproxy_wal_upload_attempt_duration', 'PUT'),
    },
    {
      title: 'Seal to stored',
      description:
        'From an object’s seal until it is stored, queueing and retries included: what a held fetch and a durable ack wait for.',
      kind: 'timeseries',
      unit: 'ms',
      queries: p50p99('walproxy_wal_upload_duration', 'upload'),
    },
    {
      title: 'PUT errors',
      description: 'Upload attempts retried, and objects not stored at all (their batches replicate inline).',
      kind: 'timeseries',
      unit: 'ops',
      queries: [
        {
          expr: `sum by (instance) (${rate('walproxy_wal_upload_retries_total')})`,
          legend: '{{instance}} retries',
        },
        {
          expr: `sum by (instance) (${rate('walproxy_wal_upload_failures_total')})`,
          legend: '{{instance}} not stored',
        },
      ],
    },
    {
      title: 'GETs and the range cache',
      description: 'Follower side: ranged GETs per second, and the share of range reads the cache answered.',
      kind: 'timeseries',
      unit: 'reqps',
      queries: [
        {
          expr: `sum by (instance) (${rate('walproxy_wal_reader_gets_total')})`,
          legend: '{{instance}} GETs/s',
        },
        {
          expr: `sum(${rate('walproxy_wal_reader_cache_lookups_total', 'result="hit"')}) / sum(${rate('walproxy_wal_reader_cache_lookups_total')})`,
          legend: 'cache hit ratio',
          unit: 'percentunit',
        },
      ],
    },
    {
      title: 'GET latency and errors',
      description:
        'Follower side: duration of each ranged GET, and fills that fell back because a GET failed.',
      kind: 'timeseries',
      unit: 'ms',
      queries: [
        ...p50p99('walproxy_wal_reader_get_duration', 'GET'),
        {
          expr: `sum(${rate('walproxy_fetch_fallbacks_total', 'reason="get_failed"')})`,
          legend: 'failed GETs/s',
          unit: 'ops',
        },
      ],
    },
  ],
};

const follower: RowSpec = {
  title: 'Follower fill and held fetches',
  panels: [
    {
      title: 'Fill latency (follower side)',
      description: 'A response with references to the rebuilt response, range GETs included.',
      kind: 'timeseries',
      unit: 'ms',
      queries: p50p99('walproxy_fetch_fill_duration', 'fill'),
    },
    {
      title: 'Fills past their deadline',
      description:
        'Partitions whose fill did not finish within the fill deadline and were asked inline instead (the deadline keeps followers in the ISR).',
      kind: 'timeseries',
      unit: 'ops',
      queries: [
        {
          expr: `sum by (instance) (${rate('walproxy_fetch_deadline_misses_total')})`,
          legend: '{{instance}}',
        },
      ],
    },
    {
      title: 'Partitions waiting for inline bytes',
      description: 'Follower side: partitions asking the leader for inline bytes now, after a fallback.',
      kind: 'timeseries',
      unit: 'short',
      queries: [
        { expr: `sum by (instance) (walproxy_fetch_pending_inline${sel()})`, legend: '{{instance}}' },
      ],
    },
    {
      title: 'Held fetches (leader side)',
      description:
        'Follower fetch responses held for batches still uploading, and how long (bounded by --max-hold-ms; past it the batches go inline).',
      kind: 'timeseries',
      unit: 'ms',
      queries: [
        ...p50p99('walproxy_fetch_hold_duration', 'hold'),
        { expr: `sum(${rate('walproxy_fetch_holds_total')})`, legend: 'held responses/s', unit: 'ops' },
      ],
    },
  ],
};

const memory: RowSpec = {
  title: 'Memory, CPU and queues',
  panels: [
    {
      title: 'Memory against its bound',
      description:
        'Resident memory of the sidecar process against its memory limit, the one every cache and queue bound is derived from (batch index, read cache, WAL pending bytes, connection buffers); past the limit the container is OOM-killed.',
      kind: 'timeseries',
      unit: 'bytes',
      queries: [
        { expr: `sum by (instance) (walproxy_memory_used_bytes${sel()})`, legend: '{{instance}} used' },
        { expr: `sum by (instance) (walproxy_memory_limit_bytes${sel()})`, legend: '{{instance}} bound' },
        {
          expr: `sum by (instance) (walproxy_wal_pending_bytes${sel()})`,
          legend: '{{instance}} WAL pending',
        },
        {
          expr: `sum by (instance) (walproxy_wal_reader_cache_size${sel()})`,
          legend: '{{instance}} range cache',
        },
      ],
    },
    {
      title: 'Upload and metadata queues',
      description:
        'Store calls running, sealed objects waiting for a slot, metadata records waiting to be sent.',
      kind: 'timeseries',
      unit: 'short',
      queries: [
        {
          expr: `sum by (instance) (walproxy_wal_uploads_in_flight${sel()})`,
          legend: '{{instance}} uploads in flight',
        },
        {
          expr: `sum by (instance) (walproxy_wal_uploads_queued${sel()})`,
          legend: '{{instance}} objects queued',
        },
        {
          expr: `sum by (instance) (walproxy_wal_metadata_queued${sel()})`,
          legend: '{{instance}} metadata queued',
        },
      ],
    },
    {
      title: 'CPU',
      description:
        'CPU-seconds per second of each sidecar process (1 = one core), user and system together: against the container’s CPU request and limit, and what `walproxy.cost.spent{item=~"cpu_.*"}` prices.',
      kind: 'timeseries',
      unit: 'short',
      queries: [
        {
          expr: `sum by (instance) (${rate('process_cpu_time_total')})`,
          legend: '{{instance}} cores',
        },
      ],
    },
    {
      title: 'Event-loop delay',
      description:
        'How late the sidecar’s one thread ran its timers (p99 and the longest, over 10 s windows): every byte through the sidecar waits as long. Rises with CPU throttling, long GC pauses near the memory bound, or a CPU-bound sidecar.',
      kind: 'timeseries',
      unit: 'ms',
      queries: [
        { expr: `max by (instance) (walproxy_event_loop_delay_p99${sel()})`, legend: '{{instance}} p99' },
        { expr: `max by (instance) (walproxy_event_loop_delay_max${sel()})`, legend: '{{instance}} max' },
      ],
    },
    {
      title: 'Since the last success',
      description:
        'Seconds since this sidecar last stored a WAL object (leader side) and since a GET from the store last answered (follower side); since the start before the first. Growing while batches wait or GETs are sent: the store does not answer.',
      kind: 'timeseries',
      unit: 's',
      queries: [
        {
          expr: `max by (instance) (walproxy_wal_upload_success_age_seconds${sel()})`,
          legend: '{{instance}} upload',
        },
        {
          expr: `max by (instance) (walproxy_wal_reader_success_age_seconds${sel()})`,
          legend: '{{instance}} GET',
        },
      ],
    },
  ],
};

const cost: RowSpec = {
  title: 'Cost',
  panels: [
    {
      title: 'Dollars: stock vs walproxy',
      description:
        "Per hour, priced from each sidecar's counters: stock replication of the replicated bytes (what it would cost), walproxy's replication (store requests, storage, cross-zone residue, the WAL path's CPU: the saving is the difference) and the relaying CPU any proxy in front of the broker costs (not in the saving).",
      kind: 'timeseries',
      unit: 'currencyUSD',
      width: 24,
      queries: [
        { expr: `3600 * sum(${rate('walproxy_cost_stock_total')})`, legend: 'stock per hour' },
        {
          expr: `3600 * sum(${rate('walproxy_cost_spent_total', 'item!="cpu_proxy"')})`,
          legend: 'walproxy per hour',
        },
        {
          expr: `3600 * sum(${rate('walproxy_cost_spent_total', 'item="cpu_proxy"')})`,
          legend: 'relaying per hour',
        },
      ],
    },
  ],
};

export const DASHBOARD_TITLE = 'walproxy';
export const DASHBOARD_UID = 'walproxy-overview';

export const DASHBOARD_ROWS: readonly RowSpec[] = [
  overview,
  listeners,
  replication,
  store,
  follower,
  memory,
  cost,
];
