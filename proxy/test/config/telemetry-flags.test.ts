import { describe, expect, it } from 'vitest';
import { parseTelemetryOptions } from '../../src/config/telemetry-flags.js';

describe('telemetry flags', () => {
  it('default to no OTLP export, service walproxy, a push a minute', () => {
    expect(parseTelemetryOptions({}, {})).toEqual({
      options: { otlpEndpoint: undefined, serviceName: 'walproxy', metricsExportIntervalMs: 60_000 },
    });
  });

  it('take the endpoint from OTEL_EXPORTER_OTLP_ENDPOINT unless the flag is set, without a trailing slash', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318/' };
    expect(parseTelemetryOptions({}, env)).toMatchObject({ options: { otlpEndpoint: 'http://env:4318' } });
    expect(parseTelemetryOptions({ 'otlp-endpoint': 'https://flag:4318' }, env)).toMatchObject({
      options: { otlpEndpoint: 'https://flag:4318' },
    });
  });

  it('report every bad value at once, one line naming its flag', () => {
    expect(
      parseTelemetryOptions({ 'otlp-endpoint': 'ftp://x', 'metrics-export-interval-ms': '5' }, {}),
    ).toEqual({
      errors: [
        '--otlp-endpoint: "ftp://x" is not an http(s) URL',
        '--metrics-export-interval-ms: "5" is not an integer from 1000 to 3600000',
      ],
    });
  });
});
