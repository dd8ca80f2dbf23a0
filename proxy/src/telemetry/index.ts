export {
  parseTelemetryOptions,
  TELEMETRY_DEFAULTS,
  type TelemetryOptions,
} from '../config/telemetry-flags.js';
export { ChannelMetrics, observeSources } from './metrics.js';
export * from './operator-view/index.js';
export {
  type CheckResult,
  Readiness,
  type ReadinessOptions,
  type ReadinessReport,
  type StoreReport,
} from './readiness.js';
export type { TelemetrySources, WalStatsSources } from './sources.js';
export { SpanMapper } from './spans.js';
export { INSTRUMENTATION_SCOPE, Telemetry, type TelemetryInit } from './telemetry.js';
