import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runKafkaTool } from './java-tools.js';

export interface VerifiableProducerResult {
  /** Values the producer's callback saw acknowledged, with where they landed. */
  acknowledged: Array<{ value: string; partition: number; offset: number }>;
  /** Values whose send failed (the callback got an exception). */
  failed: string[];
  code: number | null;
  /** The tool's log (WARN and above): why sends failed or the tool stopped. */
  stderr: string;
}

/**
 * Kafka's own VerifiableProducer (kafka-tools, used by Kafka's system tests): it sends
 * `maxMessages` values "0", "1", ... and prints one JSON event per callback, so what counts as
 * acknowledged is what the Java producer itself reported acknowledged, record by record.
 */
export async function verifiableProducer(opts: {
  bootstrap: string;
  topic: string;
  maxMessages: number;
  /** Messages per second (bounded load). */
  throughput: number;
  props?: Record<string, string | number>;
  timeoutMs?: number;
  /** Run the tool inside this network namespace (e.g. a zone's client namespace). */
  netns?: string;
}): Promise<VerifiableProducerResult> {
  const config = path.join(os.tmpdir(), `walproxy-verifiable-${process.pid}-${Date.now()}.properties`);
  const props = {
    // VerifiableProducer sets retries=0 itself, which idempotence refuses: retry until the
    // delivery timeout, as a default producer does.
    'enable.idempotence': 'true',
    retries: 2_147_483_647,
    'delivery.timeout.ms': 120_000,
    'request.timeout.ms': 10_000,
    ...opts.props,
  };
  writeFileSync(
    config,
    `${Object.entries(props)
      .map(([k, v]) => `${k}=${v}`)
      .join('\n')}\n`,
  );
  const result = await runKafkaTool(
    'org.apache.kafka.tools.VerifiableProducer',
    [
      '--bootstrap-server',
      opts.bootstrap,
      '--topic',
      opts.topic,
      '--max-messages',
      String(opts.maxMessages),
      '--throughput',
      String(opts.throughput),
      // One token: the argument parser would read a separate '-1' as an option.
      '--acks=-1',
      '--producer.config',
      config,
    ],
    { timeoutMs: opts.timeoutMs ?? 300_000, ...(opts.netns ? { netns: opts.netns } : {}) },
  );
  const acknowledged: VerifiableProducerResult['acknowledged'] = [];
  const failed: string[] = [];
  for (const line of result.stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    const event = JSON.parse(line) as { name: string; value?: string; partition?: number; offset?: number };
    if (event.name === 'producer_send_success')
      acknowledged.push({ value: event.value!, partition: event.partition!, offset: event.offset! });
    else if (event.name === 'producer_send_error') failed.push(event.value ?? '?');
  }
  return { acknowledged, failed, code: result.code, stderr: result.stderr };
}
