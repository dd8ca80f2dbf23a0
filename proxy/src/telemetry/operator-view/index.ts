// The declarations only: grafana.ts and prometheus-rules.ts (and their development dependency
// @grafana/schema) stay out of what the sidecar loads.
export * from './alerts.js';
export * from './dashboard.js';
export * from './model.js';
export * from './pending-metrics.js';
