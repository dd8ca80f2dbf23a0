// @walproxy/proxy's public surface: what runs a sidecar in process, opens a WAL store, and prices
// and observes the WAL, as the e2e harness, its benchmarks and the operator-view tests use it
// (the CLI, dist/cli/main.js, imports its modules directly). Everything else is internal: import
// it by module path inside proxy/. The package exports only this entry ("." in package.json), so
// a name e2e/ needs stays here rather than behind a deep import.

// Running a sidecar in process (e2e/src/cluster/in-process-sidecars.ts, the capture tools).
export { parseSidecarConfig, type RawSidecarOptions, type SidecarConfig } from './config/sidecar-config.js';
// What the WAL costs and saves (`walproxy cost`, the cost benchmark, the demo).
export { countersFromScrapes } from './cost/counters-source.js';
export { type ClusterLayout, DEFAULT_CPU, objectEconomics } from './cost/economics.js';
export { type MeasuredCost, type MeasuredCounters, priceMeasured } from './cost/measured.js';
export { DEFAULT_PRICES, type PriceTable } from './cost/prices.js';
export { createLogger, type Logger } from './log.js';
export { type MemoryBounds, memoryBounds } from './memory-budget.js';
// The metadata topic and the SASL login the sidecar's own client uses (e2e security tests).
export { Secret, saslAuthenticate } from './metadata/sasl-client.js';
export {
  groupPieces,
  WAL_METADATA_TOPIC,
  type WalMetadataRecordV1,
  type WalPiece,
} from './metadata/wal-metadata-publisher.js';
export type { FrameObserver, RequestInfo } from './net/frame-filter.js';
export { Sidecar } from './sidecar.js';
// The WAL store and objects (the wal tools' tests, the store benchmarks).
export {
  isObjectStoreError,
  type ObjectStore,
  ObjectStoreError,
  type ObjectStoreOptions,
  openObjectStore,
} from './store/index.js';
export { encodeKey, resolveS3Signing, type S3Signing } from './store/s3-data-path.js';
export type { TelemetryInit } from './telemetry/index.js';
// The operator view: alert rules and dashboard, checked against a real Prometheus and Grafana.
export {
  ALERTS,
  DASHBOARD_ROWS,
  EXTERNAL_METRICS,
  metricsIn,
  PENDING_METRICS,
  prometheusRulesYaml,
} from './telemetry/index.js';
export { WAL_DEFAULTS } from './wal/defaults.js';
export {
  parseWalObjectKey,
  type WalAppendOptions,
  type WalAppendTicket,
  type WalLocation,
  WalWriter,
  type WalWriterOptions,
} from './wal/index.js';
export { SEALING_DEFAULTS, steadyState } from './wal/sealing-policy.js';
