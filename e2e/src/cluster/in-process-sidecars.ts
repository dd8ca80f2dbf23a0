import {
  createLogger,
  type FrameObserver,
  parseSidecarConfig,
  Sidecar,
  type TelemetryInit,
} from '@walproxy/proxy';
import { BROKER_IDS, type KafkaCluster } from './kafka-cluster.js';

/** Turns `--flag=value` arguments (as the harness passes them) into the raw options yargs would collect. */
export function rawOptions(args: string[]): Record<string, unknown> {
  const raw: Record<string, unknown> = {};
  for (const arg of args) {
    if (!arg.startsWith('--')) continue;
    const [flag, ...rest] = arg.slice(2).split('=');
    const value = rest.join('=');
    const existing = raw[flag!];
    raw[flag!] =
      existing === undefined ? value : [...(Array.isArray(existing) ? existing : [existing]), value];
  }
  return raw;
}

/**
 * Runs the sidecars of a cluster started with `sidecars: 'external'` inside this process, so a
 * test can observe frames or give them in-memory telemetry exporters.
 */
export async function startInProcessSidecars(
  cluster: KafkaCluster,
  options: {
    observer?: FrameObserver;
    telemetry?: (brokerId: number) => Partial<Omit<TelemetryInit, 'sources' | 'log'>>;
    logLevel?: string;
  } = {},
): Promise<Sidecar[]> {
  const sidecars: Sidecar[] = [];
  try {
    for (const id of BROKER_IDS) {
      const parsed = parseSidecarConfig(rawOptions(cluster.sidecarArguments(id)));
      if ('errors' in parsed) throw new Error(parsed.errors.join('\n'));
      const sidecar = new Sidecar(
        parsed.config,
        createLogger(options.logLevel ?? 'warn'),
        options.observer,
        options.telemetry?.(id),
      );
      await sidecar.start();
      sidecars.push(sidecar);
    }
  } catch (error) {
    await Promise.all(sidecars.map((s) => s.stop(1_000)));
    throw error;
  }
  return sidecars;
}
