import { pino } from 'pino';

export type Logger = pino.Logger;

/**
 * Structured JSON logs on stdout, one object per line (pino), written synchronously: volume is
 * low (nothing per message is logged above debug; stack traces only at debug) and no line is
 * lost when the process exits.
 */
export function createLogger(
  level = process.env.WALPROXY_LOG_LEVEL ?? 'info',
  destination?: pino.DestinationStream,
): Logger {
  return pino(
    {
      level,
      base: { service: 'walproxy' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination ?? pino.destination({ fd: 1, sync: true }),
  );
}
