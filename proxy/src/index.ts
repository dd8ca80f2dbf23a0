// @walproxy/proxy's public surface, what e2e/ imports from the package (the CLI, dist/cli/main.js,
// imports its modules directly; deploy/test reaches proxy/src by path):
// - running a sidecar in process: parseSidecarConfig, Sidecar, createLogger, FrameObserver, and
//   the shape of its /counters (e2e/src/cluster/, the capture tools);
// - the WAL store and objects: openObjectStore, WalWriter, parseWalObjectKey, the metadata topic's
//   records (the wal tools' tests, the store benchmarks);
// - what the WAL costs and saves: prices, economics, measured counters, the WAL defaults and the
//   sealing policy's steady state (the cost benchmark, the demo);
// - the operator view: alert rules and dashboard rows (e2e/test/operator-view.test.ts).
// Everything else is internal: import it by module path inside proxy/. The package exports only
// this entry ("." in package.json), so an internal name e2e/ uses stays here rather than behind a
// deep import: FrameObserver/RequestInfo, groupPieces/WalPiece, encodeKey/resolveS3Signing,
// saslAuthenticate/Secret, memoryBounds.
export { parseSidecarConfig, type RawSidecarOptions, type SidecarConfig } from './config/sidecar-config.js';
export { countersFromScrapes } from './cost/counters-source.js';
export { type ClusterLayout, DEFAULT_CPU, objectEconomics } from './cost/economics.js';
export { type MeasuredCost, type MeasuredCounters, priceMeasured } from './cost/measured.js';
export { DEFAULT_PRICES, type PriceTable } from './cost/prices.js';
export { createLogger, type Logger } from './log.js';
export {
  DEFAULT_MEMORY_LIMIT_BYTES,
  type MemoryBounds,
  memoryBounds,
  nodeHeapFlags,
} from './memory-budget.js';
export { Secret, saslAuthenticate } from './metadata/sasl-client.js';
export {
  groupPieces,
  WAL_METADATA_TOPIC,
  type WalMetadataRecordV1,
  type WalPiece,
} from './metadata/wal-metadata-publisher.js';
export type { ListenerCounters } from './net/counters.js';
export type { FrameObserver, RequestInfo } from './net/frame-filter.js';
export { Sidecar } from './sidecar.js';
export {
  isObjectStoreError,
  type ObjectStore,
  ObjectStoreError,
  type ObjectStoreOptions,
  openObjectStore,
} from './store/index.js';
export { encodeKey, resolveS3Signing, type S3Signing } from './store/s3-signing.js';
export type { TelemetryInit } from './telemetry/index.js';
export {
  ALERTS,
  DASHBOARD_ROWS,
  EXTERNAL_METRICS,
  metricsIn,
  OPTIONAL_METRICS,
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
