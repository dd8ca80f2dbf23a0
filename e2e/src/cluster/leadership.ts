import { withAdmin } from '../clients/kafkajs.js';

/** One partition's leader and in-sync replicas, as a Metadata answer gives them. */
export interface PartitionState {
  partition: number;
  leader: number;
  isr: number[];
  replicas: number[];
}

/** Leaders and ISRs of `topic`'s partitions, from a fresh Metadata request. */
export async function partitionStates(bootstrap: string, topic: string): Promise<PartitionState[]> {
  return withAdmin(bootstrap, async (admin) => {
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
    return metadata.topics[0]!.partitions.map((p) => ({
      partition: p.partitionId,
      leader: p.leader,
      isr: [...p.isr],
      replicas: [...p.replicas],
    })).sort((a, b) => a.partition - b.partition);
  });
}

/**
 * Polls (every `intervalMs`) until `done` holds for the topic's partitions; resolves with the
 * time it first held (ms since the epoch) and the states then. Metadata errors while brokers come
 * and go count as "not yet".
 */
export async function waitForPartitions(
  bootstrap: string,
  topic: string,
  done: (states: PartitionState[]) => boolean,
  { timeoutMs = 60_000, intervalMs = 100, what = 'partition condition' } = {},
): Promise<{ atMs: number; states: PartitionState[] }> {
  const deadline = Date.now() + timeoutMs;
  let last: PartitionState[] | string = [];
  for (;;) {
    try {
      const states = await partitionStates(bootstrap, topic);
      const atMs = Date.now();
      last = states;
      if (done(states)) return { atMs, states };
    } catch (error) {
      last = String(error);
    }
    if (Date.now() > deadline)
      throw new Error(`${what} not met on ${topic} in ${timeoutMs} ms; last: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Waits until every partition of each topic has all its replicas in sync. */
export async function waitForFullIsr(bootstrap: string, topics: string[], timeoutMs = 90_000): Promise<void> {
  for (const topic of topics) {
    await waitForPartitions(bootstrap, topic, (s) => s.every((p) => p.isr.length === p.replicas.length), {
      timeoutMs,
      intervalMs: 500,
      what: 'full ISR',
    });
  }
}

/** Sum of the partitions' end offsets: how many records a full read finds. */
export async function endOffsetTotal(bootstrap: string, topic: string): Promise<number> {
  const offsets = await withAdmin(bootstrap, (admin) => admin.fetchTopicOffsets(topic));
  return offsets.reduce((n, o) => n + Number(o.high), 0);
}
