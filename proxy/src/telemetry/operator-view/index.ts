// Not grafana.ts: it and its development dependency @grafana/schema stay out of what the sidecar
// loads (generate.ts and the tests import it directly).
export * from './alerts.js';
export * from './dashboard.js';
export * from './model.js';
export * from './pending-metrics.js';
export * from './prometheus-rules.js';
