// Every alert rule as shipped (deploy/observability/walproxy-alerts.yaml, the same file the chart
// ships) under `promtool test rules`: each fires on its fault, with its labels and rendered
// annotations, and stays silent on a healthy series and on the near-misses that used to fire it.
// A rule without a firing case and a silent case fails the coverage test below.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { ALERTS } from '../../src/telemetry/operator-view/alerts.js';
import { GENERATED_FILES } from '../../src/telemetry/operator-view/generate.js';

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url));
const rulesFile = path.join(repoRoot, GENERATED_FILES.rules[0]);

interface RuleCase {
  /** The situation (Given), in words. */
  given: string;
  /** Series selector → promtool's expanding notation, one sample a minute. */
  series: Record<string, string>;
  /** When the rule is evaluated. */
  at: string;
  /** The alerts expected firing then (labels besides alertname and severity; `value`: $value as rendered); [] = silent. */
  firing: Array<{ labels: Record<string, string>; value?: string }>;
}

/** One sidecar's histogram: `perMinute` observations a minute in the bucket whose upper bound is `le`. */
function histogram(name: string, instance: string, le: number, perMinute: number, minutes: number) {
  const bounds = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000];
  const series: Record<string, string> = {};
  for (const b of [...bounds.map(String), '+Inf']) {
    const filled = b === '+Inf' || Number(b) >= le;
    series[`${name}_bucket{instance="${instance}",le="${b}"}`] = filled
      ? `0+${perMinute}x${minutes}`
      : `0x${minutes}`;
  }
  return series;
}

const b1 = { instance: 'b1' };

const CASES: Record<string, { fires: RuleCase[]; silent: RuleCase[] }> = {
  WalproxySidecarDown: {
    fires: [
      {
        given: 'a target that stopped answering at minute 6',
        series: {
          'up{job="walproxy",instance="b1:9180"}': '1x5 0x10',
          'up{job="walproxy",instance="b2:9180"}': '1x15',
        },
        at: '10m',
        firing: [{ labels: { job: 'walproxy', instance: 'b1:9180' } }],
      },
      {
        given: 'no target of the job at all (nothing selects the sidecars, or every pod is gone)',
        series: { 'up{job="kafka-exporter",instance="x:9308"}': '1x15' },
        at: '10m',
        firing: [{ labels: { job: 'walproxy' } }],
      },
    ],
    silent: [
      {
        given: 'every target answering',
        series: {
          'up{job="walproxy",instance="b1:9180"}': '1x15',
          'up{job="walproxy",instance="b2:9180"}': '1x15',
        },
        at: '10m',
        firing: [],
      },
      {
        given: 'one failed scrape, shorter than the rule’s `for`',
        series: { 'up{job="walproxy",instance="b1:9180"}': '1x5 0 1x10' },
        at: '7m',
        firing: [],
      },
    ],
  },
  WalproxySidecarNotReady: {
    fires: [
      {
        given: 'a native sidecar (an init container, as the chart runs it) not ready since minute 6',
        series: {
          'kube_pod_init_container_status_ready{namespace="kafka",pod="kafka-broker-0",container="walproxy"}':
            '1x5 0x10',
        },
        at: '12m',
        firing: [{ labels: { namespace: 'kafka', pod: 'kafka-broker-0', container: 'walproxy' } }],
      },
      {
        given: 'a plain sidecar container (nativeSidecar=false) not ready since minute 6',
        series: {
          'kube_pod_container_status_ready{namespace="kafka",pod="kafka-broker-1",container="walproxy"}':
            '1x5 0x10',
        },
        at: '12m',
        firing: [{ labels: { namespace: 'kafka', pod: 'kafka-broker-1', container: 'walproxy' } }],
      },
    ],
    silent: [
      {
        given: 'the native sidecar ready, and the broker container not (not walproxy’s alert)',
        series: {
          'kube_pod_init_container_status_ready{namespace="kafka",pod="kafka-broker-0",container="walproxy"}':
            '1x15',
          'kube_pod_container_status_ready{namespace="kafka",pod="kafka-broker-0",container="kafka"}': '0x15',
        },
        at: '12m',
        firing: [],
      },
    ],
  },
  WalproxySidecarRestarted: {
    fires: [
      {
        given: 'the native sidecar (an init container, as the chart runs it) restarted once at minute 6',
        series: {
          'kube_pod_init_container_status_restarts_total{namespace="kafka",pod="kafka-broker-0",container="walproxy"}':
            '0x5 1x15',
        },
        at: '8m',
        firing: [
          { labels: { namespace: 'kafka', pod: 'kafka-broker-0', container: 'walproxy' }, value: '1' },
        ],
      },
      {
        given: 'a plain sidecar container (nativeSidecar=false) restarting twice within minutes',
        series: {
          'kube_pod_container_status_restarts_total{namespace="kafka",pod="kafka-broker-1",container="walproxy"}':
            '0x5 1x3 2x10',
        },
        at: '10m',
        firing: [
          { labels: { namespace: 'kafka', pod: 'kafka-broker-1', container: 'walproxy' }, value: '2' },
        ],
      },
    ],
    silent: [
      {
        given:
          'a restart 20 minutes ago, a new pod whose count starts at 0, and the broker container restarting (not walproxy’s alert)',
        series: {
          'kube_pod_init_container_status_restarts_total{namespace="kafka",pod="kafka-broker-0",container="walproxy"}':
            '0x5 1x30',
          'kube_pod_init_container_status_restarts_total{namespace="kafka",pod="kafka-broker-1",container="walproxy"}':
            '_x20 0x15',
          'kube_pod_container_status_restarts_total{namespace="kafka",pod="kafka-broker-0",container="kafka"}':
            '0+1x35',
        },
        at: '30m',
        firing: [],
      },
    ],
  },
  WalproxySidecarOOMKilled: {
    fires: [
      {
        given: 'the native sidecar killed at its memory limit and restarted at minute 6',
        series: {
          'kube_pod_init_container_status_restarts_total{namespace="kafka",pod="kafka-broker-0",container="walproxy"}':
            '0x5 1x15',
          'kube_pod_init_container_status_last_terminated_reason{namespace="kafka",pod="kafka-broker-0",container="walproxy",reason="OOMKilled"}':
            '_x5 1x15',
        },
        at: '8m',
        firing: [{ labels: { namespace: 'kafka', pod: 'kafka-broker-0', container: 'walproxy' } }],
      },
    ],
    silent: [
      {
        given: 'an OOM kill 20 minutes ago (its reason stays until the next termination)',
        series: {
          'kube_pod_init_container_status_restarts_total{namespace="kafka",pod="kafka-broker-0",container="walproxy"}':
            '0x5 1x30',
          'kube_pod_init_container_status_last_terminated_reason{namespace="kafka",pod="kafka-broker-0",container="walproxy",reason="OOMKilled"}':
            '_x5 1x30',
        },
        at: '30m',
        firing: [],
      },
      {
        given: 'a restart after an error exit, not the memory limit',
        series: {
          'kube_pod_init_container_status_restarts_total{namespace="kafka",pod="kafka-broker-0",container="walproxy"}':
            '0x5 1x15',
          'kube_pod_init_container_status_last_terminated_reason{namespace="kafka",pod="kafka-broker-0",container="walproxy",reason="Error"}':
            '_x5 1x15',
        },
        at: '8m',
        firing: [],
      },
    ],
  },
  WalproxyStoreUnhealthy: {
    fires: [
      {
        given: 'a sidecar that judged its store unusable at minute 6',
        series: { 'walproxy_store_healthy{instance="b1"}': '1x5 0x10' },
        at: '10m',
        firing: [{ labels: b1 }],
      },
    ],
    silent: [
      {
        given: 'the store in use',
        series: { 'walproxy_store_healthy{instance="b1"}': '1x15' },
        at: '10m',
        firing: [],
      },
    ],
  },
  WalproxyInlineFallback: {
    fires: [
      {
        given:
          'a leader sending 9 batches/s inline for not_stored_in_time against 1 reference/s from minute 10, with more control, topic_not_in_wal and mode_inline batches than both',
        series: {
          'walproxy_fetch_inline_batches_total{instance="b1",reason="not_stored_in_time"}': '0x10 0+540x30',
          'walproxy_fetch_inline_batches_total{instance="b1",reason="control"}': '0+600x40',
          'walproxy_fetch_inline_batches_total{instance="b1",reason="topic_not_in_wal"}': '0+600x40',
          'walproxy_fetch_inline_batches_total{instance="b1",reason="mode_inline"}': '0+600x40',
          'walproxy_fetch_references_total{instance="b1",side="leader"}': '0+60x40',
        },
        at: '30m',
        firing: [{ labels: b1, value: '90%' }],
      },
      {
        given:
          'b1 sending 9 batches/s of WAL topics inline because its index lacks them (not_in_wal), b2 as many of topics off the WAL or mode=inline',
        series: {
          'walproxy_fetch_inline_batches_total{instance="b1",reason="not_in_wal"}': '0+540x30',
          'walproxy_fetch_references_total{instance="b1",side="leader"}': '0+60x30',
          'walproxy_fetch_inline_batches_total{instance="b2",reason="topic_not_in_wal"}': '0+300x30',
          'walproxy_fetch_inline_batches_total{instance="b2",reason="mode_inline"}': '0+240x30',
          'walproxy_fetch_references_total{instance="b2",side="leader"}': '0+60x30',
        },
        at: '20m',
        firing: [{ labels: b1, value: '90%' }],
      },
    ],
    silent: [
      {
        given: 'only batches inline by design (control, topic_not_in_wal, mode_inline, group_inline)',
        series: {
          'walproxy_fetch_inline_batches_total{instance="b1",reason="control"}': '0+600x40',
          'walproxy_fetch_inline_batches_total{instance="b1",reason="group_inline"}': '0+600x40',
          'walproxy_fetch_references_total{instance="b1",side="leader"}': '0+60x40',
        },
        at: '30m',
        firing: [],
      },
      {
        given: 'a fallback for 8 minutes, under the 10 of `for`',
        series: {
          'walproxy_fetch_inline_batches_total{instance="b1",reason="not_stored_in_time"}': '0x10 0+540x30',
          'walproxy_fetch_references_total{instance="b1",side="leader"}': '0+60x40',
        },
        at: '18m',
        firing: [],
      },
    ],
  },
  WalproxyStorePutErrors: {
    fires: [
      {
        given: 'one store call in ten failing (600 attempts a minute, 60 retries)',
        series: {
          'walproxy_wal_upload_attempts_total{instance="b1"}': '0+600x40',
          'walproxy_wal_upload_retries_total{instance="b1"}': '0+60x40',
          'walproxy_wal_upload_failures_total{instance="b1"}': '0x40',
        },
        at: '20m',
        firing: [{ labels: b1, value: '10%' }],
      },
    ],
    silent: [
      {
        given: 'one retry every 4 minutes at 10 attempts/s (what made the old rule fire)',
        series: {
          'walproxy_wal_upload_attempts_total{instance="b1"}': '0+600x40',
          'walproxy_wal_upload_retries_total{instance="b1"}': '0+0.25x40',
          'walproxy_wal_upload_failures_total{instance="b1"}': '0x40',
        },
        at: '30m',
        firing: [],
      },
    ],
  },
  WalproxyStoreGetErrors: {
    fires: [
      {
        given: 'fills falling back for get_failed at 0.1 partition/s',
        series: { 'walproxy_fetch_fallbacks_total{instance="b1",reason="get_failed"}': '0+6x40' },
        at: '20m',
        firing: [{ labels: b1, value: '100m' }],
      },
    ],
    silent: [
      {
        given: 'one failed GET at minute 11',
        series: { 'walproxy_fetch_fallbacks_total{instance="b1",reason="get_failed"}': '0x10 1x30' },
        at: '16m',
        firing: [],
      },
    ],
  },
  WalproxyFollowerDigestMismatch: {
    fires: [
      {
        given: 'follower b1 refusing one forged batch at minute 11, b2 never',
        series: {
          'walproxy_fetch_digest_mismatches_total{instance="b1"}': '0x10 1x30',
          'walproxy_fetch_digest_mismatches_total{instance="b2"}': '0x40',
        },
        at: '12m',
        firing: [{ labels: b1, value: '1' }],
      },
    ],
    silent: [
      {
        given: 'the refusal of minute 11, out of the window by minute 30',
        series: { 'walproxy_fetch_digest_mismatches_total{instance="b1"}': '0x10 1x30' },
        at: '30m',
        firing: [],
      },
    ],
  },
  WalproxyStoreSlowPuts: {
    fires: [
      {
        given: 'every store call taking 500-1000 ms',
        series: histogram('walproxy_wal_upload_attempt_duration', 'b1', 1000, 60, 30),
        at: '20m',
        firing: [{ labels: b1, value: '995' }],
      },
    ],
    silent: [
      {
        given: 'store calls of 10-25 ms',
        series: histogram('walproxy_wal_upload_attempt_duration', 'b1', 25, 60, 30),
        at: '20m',
        firing: [],
      },
    ],
  },
  WalproxySlowFills: {
    fires: [
      {
        given: 'fills taking 100-250 ms, held to the 250 ms fill deadline (the old > 1000 ms never fired)',
        series: histogram('walproxy_fetch_fill_duration', 'b1', 250, 60, 30),
        at: '20m',
        firing: [{ labels: b1, value: '248.5' }],
      },
    ],
    silent: [
      {
        given: 'fills of 5-10 ms',
        series: histogram('walproxy_fetch_fill_duration', 'b1', 10, 60, 30),
        at: '20m',
        firing: [],
      },
    ],
  },
  WalproxyFillDeadlineMissed: {
    fires: [
      {
        given: 'fills missing the deadline at 0.1 response/s',
        series: { 'walproxy_fetch_deadline_misses_total{instance="b1"}': '0+6x40' },
        at: '20m',
        firing: [{ labels: b1, value: '100m' }],
      },
    ],
    silent: [
      {
        given: 'one late fill at minute 11',
        series: { 'walproxy_fetch_deadline_misses_total{instance="b1"}': '0x10 1x30' },
        at: '16m',
        firing: [],
      },
    ],
  },
  WalproxyDurableAckFailures: {
    fires: [
      {
        given: 'durable-ack produces answered REQUEST_TIMED_OUT from minute 6',
        series: {
          'walproxy_produce_durable_ack_failures_total{instance="b1",after_append="false"}': '0x5 0+60x15',
          'walproxy_produce_durable_ack_failures_total{instance="b1",after_append="true"}': '0x20',
        },
        at: '15m',
        firing: [{ labels: b1, value: '1' }],
      },
    ],
    silent: [
      {
        given: 'no failure',
        series: {
          'walproxy_produce_durable_ack_failures_total{instance="b1",after_append="false"}': '0x15',
          'walproxy_produce_durable_ack_failures_total{instance="b1",after_append="true"}': '0x15',
        },
        at: '10m',
        firing: [],
      },
    ],
  },
  WalproxyMetadataNotPublished: {
    fires: [
      {
        given: 'sends to the metadata topic failing at 0.1/s',
        series: {
          'walproxy_wal_metadata_overflowed_total{instance="b1"}': '0x30',
          'walproxy_wal_metadata_send_failures_total{instance="b1"}': '0+6x30',
        },
        at: '15m',
        firing: [{ labels: b1 }],
      },
    ],
    silent: [
      {
        given: 'every piece published',
        series: {
          'walproxy_wal_metadata_overflowed_total{instance="b1"}': '0x30',
          'walproxy_wal_metadata_send_failures_total{instance="b1"}': '0x30',
        },
        at: '15m',
        firing: [],
      },
    ],
  },
  WalproxyMemoryNearBound: {
    fires: [
      {
        given: 'resident memory at 95 % of the limit',
        series: {
          'walproxy_memory_used_bytes{instance="b1"}': '486x15',
          'walproxy_memory_limit_bytes{instance="b1"}': '512x15',
        },
        at: '10m',
        firing: [{ labels: b1, value: '94.92%' }],
      },
    ],
    silent: [
      {
        given: 'resident memory at half the limit',
        series: {
          'walproxy_memory_used_bytes{instance="b1"}': '256x15',
          'walproxy_memory_limit_bytes{instance="b1"}': '512x15',
        },
        at: '10m',
        firing: [],
      },
    ],
  },
  WalproxyEventLoopLag: {
    fires: [
      {
        given: 'the event loop late by 250 ms at p99 from minute 6',
        series: { 'walproxy_event_loop_delay_p99{instance="b1"}': '5x5 250x15' },
        at: '15m',
        firing: [{ labels: b1, value: '250' }],
      },
    ],
    silent: [
      {
        given: 'a 5 ms p99, and one 500 ms window (a GC pause) at minute 6',
        series: { 'walproxy_event_loop_delay_p99{instance="b1"}': '5x5 500 5x14' },
        at: '8m',
        firing: [],
      },
    ],
  },
  WalproxyUploadsStalled: {
    fires: [
      {
        given: 'batches waiting to be stored and no upload stored for 10 minutes (a frozen store)',
        series: {
          'walproxy_wal_upload_success_age_seconds{instance="b1"}': '0+60x20',
          'walproxy_wal_pending_bytes{instance="b1"}': '100000x20',
        },
        at: '10m',
        firing: [{ labels: b1, value: '10m 0s' }],
      },
    ],
    silent: [
      {
        given: 'an idle leader: nothing stored for 10 minutes, nothing waiting',
        series: {
          'walproxy_wal_upload_success_age_seconds{instance="b1"}': '0+60x20',
          'walproxy_wal_pending_bytes{instance="b1"}': '0x20',
        },
        at: '10m',
        firing: [],
      },
      {
        given: 'a busy leader storing an object every few seconds',
        series: {
          'walproxy_wal_upload_success_age_seconds{instance="b1"}': '2x20',
          'walproxy_wal_pending_bytes{instance="b1"}': '100000x20',
        },
        at: '10m',
        firing: [],
      },
    ],
  },
  WalproxyGetsStalled: {
    fires: [
      {
        given: 'a follower side sending a GET a second, none answered for 10 minutes',
        series: {
          'walproxy_wal_reader_success_age_seconds{instance="b1"}': '0+60x20',
          'walproxy_wal_reader_gets_total{instance="b1",kind="ranged"}': '0+60x20',
        },
        at: '10m',
        firing: [{ labels: b1, value: '10m 0s' }],
      },
    ],
    silent: [
      {
        given: 'a follower side with nothing to read (no GET sent)',
        series: {
          'walproxy_wal_reader_success_age_seconds{instance="b1"}': '0+60x20',
          'walproxy_wal_reader_gets_total{instance="b1",kind="ranged"}': '0x20',
        },
        at: '10m',
        firing: [],
      },
    ],
  },
  WalproxyUnderReplicatedPartitions: {
    fires: [
      {
        given: 'three partitions led by b1 out of their ISR from minute 6 (a follower kept behind)',
        series: {
          'walproxy_partitions_under_replicated{instance="b1"}': '0x5 3x15',
          'walproxy_partitions_under_replicated{instance="b2"}': '0x20',
        },
        at: '15m',
        firing: [{ labels: b1, value: '3' }],
      },
    ],
    silent: [
      {
        given:
          'a follower’s broker restarting: four partitions under-replicated for 3 minutes, then caught up',
        series: { 'walproxy_partitions_under_replicated{instance="b1"}': '0x5 4x3 0x12' },
        at: '9m',
        firing: [],
      },
      {
        given: 'every ISR full',
        series: { 'walproxy_partitions_under_replicated{instance="b1"}': '0x20' },
        at: '15m',
        firing: [],
      },
    ],
  },
  WalproxyReplicationConnectFailures: {
    fires: [
      {
        given:
          'b1’s egress to broker 2 failing to connect once a second (a peer sidecar that does not answer)',
        series: {
          'walproxy_listener_upstream_connect_failures_total{instance="b1",listener="egress-2"}': '0+60x30',
          'walproxy_listener_upstream_connect_failures_total{instance="b1",listener="egress-3"}': '0x30',
        },
        at: '20m',
        firing: [{ labels: { instance: 'b1', listener: 'egress-2' }, value: '1' }],
      },
    ],
    silent: [
      {
        given: 'a peer’s rolling restart: its egress failing for 2 minutes, then connected',
        series: {
          'walproxy_listener_upstream_connect_failures_total{instance="b1",listener="egress-2"}':
            '0x10 0+30x2 60x20',
        },
        at: '17m',
        firing: [],
      },
      {
        given: 'the client ingress failing to reach a stopped broker (clients, not replication)',
        series: {
          'walproxy_listener_upstream_connect_failures_total{instance="b1",listener="client"}': '0+60x30',
          'walproxy_listener_upstream_connect_failures_total{instance="b1",listener="replication"}': '0x30',
        },
        at: '20m',
        firing: [],
      },
    ],
  },
  WalproxyReplicationTlsFailures: {
    fires: [
      {
        given:
          'b1’s replication ingress refusing a peer’s certificate 6 times a minute, and b2’s egress failing its handshakes to broker 1',
        series: {
          'walproxy_listener_tls_handshake_failures_total{instance="b1",listener="replication"}': '0+6x30',
          'walproxy_listener_upstream_tls_handshake_failures_total{instance="b2",listener="egress-1"}':
            '0+6x30',
          'walproxy_listener_upstream_tls_handshake_failures_total{instance="b2",listener="egress-3"}':
            '0x30',
        },
        at: '20m',
        firing: [
          { labels: { instance: 'b1', listener: 'replication' }, value: '100m' },
          { labels: { instance: 'b2', listener: 'egress-1' }, value: '100m' },
        ],
      },
    ],
    silent: [
      {
        given: 'clients refused on the client ingress, and one failed handshake to a peer at minute 11',
        series: {
          'walproxy_listener_tls_handshake_failures_total{instance="b1",listener="client"}': '0+60x30',
          'walproxy_listener_tls_handshake_failures_total{instance="b1",listener="replication"}': '0x30',
          'walproxy_listener_upstream_tls_handshake_failures_total{instance="b1",listener="egress-2"}':
            '0x10 1x20',
        },
        at: '20m',
        firing: [],
      },
    ],
  },
  WalproxyCertificateExpiring: {
    fires: [
      {
        given: 'the peer client certificate of b1 expiring in 10 days, its CA in a year',
        series: {
          'walproxy_tls_certificate_expiry_seconds{instance="b1",tls="peer client",file="cert"}':
            '864000-60x30',
          'walproxy_tls_certificate_expiry_seconds{instance="b1",tls="peer client",file="ca"}':
            '31536000-60x30',
        },
        at: '20m',
        firing: [{ labels: { instance: 'b1', tls: 'peer client', file: 'cert' }, value: '9d 23h 40m 0s' }],
      },
    ],
    silent: [
      {
        given: 'certificates valid for 90 more days',
        series: {
          'walproxy_tls_certificate_expiry_seconds{instance="b1",tls="client ingress",file="cert"}':
            '7776000-60x30',
        },
        at: '20m',
        firing: [],
      },
    ],
  },
  WalproxySavingNegative: {
    fires: [
      {
        given:
          'WAL objects uploaded whose PUTs cost $0.02 a minute against $0.01 of stock replication, and relaying CPU (not counted)',
        series: {
          'walproxy_cost_spent_total{instance="b1",item="put_requests"}': '0+0.02x150',
          'walproxy_cost_spent_total{instance="b1",item="cpu_proxy"}': '0+1x150',
          'walproxy_cost_stock_total{instance="b1"}': '0+0.01x150',
          'walproxy_wal_bytes_uploaded_total{instance="b1"}': '0+1000000x150',
        },
        at: '130m',
        // Rendered as dollars ("0.6 USD more"), not "-600m".
        firing: [{ labels: {}, value: '0.6' }],
      },
    ],
    silent: [
      {
        given:
          'an all-inline cluster: no WAL object uploaded, CPU charged to cpu_wal by a sidecar from before the fix (the old rule fired)',
        series: {
          'walproxy_cost_spent_total{instance="b1",item="cross_zone"}': '0+0.01x150',
          'walproxy_cost_spent_total{instance="b1",item="cpu_wal"}': '0+0.001x150',
          'walproxy_cost_stock_total{instance="b1"}': '0+0.01x150',
          'walproxy_wal_bytes_uploaded_total{instance="b1"}': '0x150',
        },
        at: '130m',
        firing: [],
      },
      {
        given: 'an idle cluster: relaying CPU only',
        series: {
          'walproxy_cost_spent_total{instance="b1",item="cpu_proxy"}': '0+0.001x150',
          'walproxy_cost_stock_total{instance="b1"}': '0x150',
          'walproxy_wal_bytes_uploaded_total{instance="b1"}': '0x150',
        },
        at: '130m',
        firing: [],
      },
      {
        given: 'WAL objects that save: $0.01 a minute spent against $0.02 of stock',
        series: {
          'walproxy_cost_spent_total{instance="b1",item="put_requests"}': '0+0.01x150',
          'walproxy_cost_stock_total{instance="b1"}': '0+0.02x150',
          'walproxy_wal_bytes_uploaded_total{instance="b1"}': '0+1000000x150',
        },
        at: '130m',
        firing: [],
      },
    ],
  },
};

/**
 * Renders an annotation as Prometheus would for an alert with these labels and this $value as
 * rendered: the template forms the rules use, and nothing else (an unknown form fails the test).
 */
function render(template: string, labels: Record<string, string>, value: string | undefined): string {
  let out = template.replace(
    /\{\{ with \$labels\.(\w+) \}\}(.*?)\{\{ else \}\}(.*?)\{\{ end \}\}/g,
    (_, name: string, then: string, otherwise: string) =>
      labels[name] ? then.replaceAll('{{ . }}', labels[name]) : otherwise,
  );
  out = out.replace(/\{\{ \$labels\.(\w+) \}\}/g, (_, name: string) => labels[name] ?? '');
  out = out.replace(
    /\{\{ (?:\$value \| humanize(?:Percentage|Duration)?|printf "[^"]*" \$value) \}\}/g,
    () => {
      if (value === undefined) throw new Error(`the case gives no rendered $value for: ${template}`);
      return value;
    },
  );
  if (out.includes('{{')) throw new Error(`render() does not know this template form: ${out}`);
  return out;
}

function promtoolTest(alert: string, cases: RuleCase[], dir: string): void {
  const rule = ALERTS.find((a) => a.alert === alert)!;
  const test = {
    rule_files: [rulesFile],
    evaluation_interval: '1m',
    tests: cases.map((c) => ({
      name: c.given,
      interval: '1m',
      input_series: Object.entries(c.series).map(([series, values]) => ({ series, values })),
      alert_rule_test: [
        {
          eval_time: c.at,
          alertname: alert,
          exp_alerts: c.firing.map(({ labels, value }) => ({
            exp_labels: { ...labels, severity: rule.severity },
            exp_annotations: {
              summary: render(rule.summary, labels, value),
              description: render(rule.description, labels, value),
            },
          })),
        },
      ],
    })),
  };
  const file = path.join(dir, `${alert}.test.yaml`);
  writeFileSync(file, stringify(test, { lineWidth: 0 }));
  try {
    execFileSync('promtool', ['test', 'rules', file], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string };
    throw new Error(`promtool test rules for ${alert}:\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

function hasPromtool(): boolean {
  try {
    execFileSync('promtool', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('the alert rules under promtool test rules', () => {
  it('has, for every rule in the rules file, a case that fires it and one that keeps it silent', () => {
    const missing = ALERTS.filter(
      (a) => !CASES[a.alert] || CASES[a.alert]!.fires.length === 0 || CASES[a.alert]!.silent.length === 0,
    ).map((a) => a.alert);
    expect(missing, 'rules without a firing and a silent case').toEqual([]);
    expect(Object.keys(CASES).filter((name) => !ALERTS.some((a) => a.alert === name))).toEqual([]);
    for (const { fires, silent } of Object.values(CASES)) {
      for (const c of fires) expect(c.firing.length, c.given).toBeGreaterThan(0);
      for (const c of silent) expect(c.firing, c.given).toEqual([]);
    }
  });

  describe.skipIf(!hasPromtool())(
    'with promtool (skipped only where it is missing: `make test-unit` installs the Debian package prometheus)',
    () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'walproxy-rules-'));
      afterAll(() => rmSync(dir, { recursive: true, force: true }));

      it.each(ALERTS.map((a) => a.alert).filter((name) => CASES[name]))(
        '%s fires on its fault and stays silent on healthy series',
        (alert) => {
          promtoolTest(alert, [...CASES[alert]!.fires, ...CASES[alert]!.silent], dir);
        },
      );
    },
  );
});
