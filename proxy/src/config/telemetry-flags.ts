import { FlagErrors, flagText } from './flag-values.js';

/** Telemetry settings of `walproxy sidecar` (flags --otlp-endpoint, --otel-service-name, --metrics-export-interval-ms). */
export interface TelemetryOptions {
  /** OTLP/HTTP base URL (e.g. http://collector:4318); unset = no OTLP export, /metrics only. */
  otlpEndpoint: string | undefined;
  serviceName: string;
  /** How often metrics are pushed over OTLP. */
  metricsExportIntervalMs: number;
}

export const TELEMETRY_DEFAULTS = {
  'otel-service-name': 'walproxy',
  'metrics-export-interval-ms': '60000',
} as const;

/** Reads the telemetry flags (strings, as yargs gives them); every bad value is reported by name. */
export function parseTelemetryOptions(
  argv: Record<string, unknown>,
  env: NodeJS.ProcessEnv = process.env,
): { options: TelemetryOptions } | { errors: string[] } {
  const errors = new FlagErrors();
  let otlpEndpoint = flagText(argv, 'otlp-endpoint') ?? (env.OTEL_EXPORTER_OTLP_ENDPOINT || undefined);
  if (otlpEndpoint !== undefined) {
    try {
      const url = new URL(otlpEndpoint);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http(s)');
      otlpEndpoint = otlpEndpoint.replace(/\/+$/, '');
    } catch {
      errors.add('otlp-endpoint', `${JSON.stringify(otlpEndpoint)} is not an http(s) URL`);
    }
  }
  const serviceName = flagText(argv, 'otel-service-name') ?? TELEMETRY_DEFAULTS['otel-service-name'];
  const intervalText =
    flagText(argv, 'metrics-export-interval-ms') ?? TELEMETRY_DEFAULTS['metrics-export-interval-ms'];
  const metricsExportIntervalMs = Number(intervalText);
  if (!/^\d+$/.test(intervalText) || metricsExportIntervalMs < 1000 || metricsExportIntervalMs > 3_600_000) {
    errors.add(
      'metrics-export-interval-ms',
      `${JSON.stringify(intervalText)} is not an integer from 1000 to 3600000`,
    );
  }
  if (errors.list.length > 0) return { errors: errors.list };
  return { options: { otlpEndpoint, serviceName, metricsExportIntervalMs } };
}
