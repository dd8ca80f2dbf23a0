import { type Admin, type ITopicConfig, Kafka, logLevel, type RetryOptions } from 'kafkajs';

export function kafkaClient(
  bootstrap: string,
  clientId = 'walproxy-e2e',
  retry: RetryOptions = { retries: 10, initialRetryTime: 200 },
): Kafka {
  return new Kafka({
    clientId,
    brokers: bootstrap.split(','),
    // Clients here are expected to hit refused connections (a sidecar restarting); the tests
    // assert outcomes, so kafkajs stays quiet unless asked: KAFKAJS_LOG_LEVEL=ERROR.
    logLevel: process.env.KAFKAJS_LOG_LEVEL === 'ERROR' ? logLevel.ERROR : logLevel.NOTHING,
    retry,
  });
}

/** Runs `body` with a connected admin client, disconnecting afterwards. */
export async function withAdmin<T>(bootstrap: string, body: (admin: Admin) => Promise<T>): Promise<T> {
  const admin = kafkaClient(bootstrap, 'walproxy-e2e-admin').admin();
  await admin.connect();
  try {
    return await body(admin);
  } finally {
    await admin.disconnect();
  }
}

export async function createTopic(
  bootstrap: string,
  topic: string,
  {
    partitions = 3,
    replicationFactor = 3,
    configs = {},
  }: { partitions?: number; replicationFactor?: number; configs?: Record<string, string> } = {},
): Promise<void> {
  const spec: ITopicConfig = {
    topic,
    numPartitions: partitions,
    replicationFactor,
    configEntries: Object.entries(configs).map(([name, value]) => ({ name, value })),
  };
  await withAdmin(bootstrap, async (admin) => {
    await admin.createTopics({ topics: [spec], waitForLeaders: false });
    // kafkajs' own waitForLeaders can surface UNKNOWN_TOPIC_OR_PARTITION while a KRaft broker's
    // metadata catches up (kafkajs #815); wait for every partition to have a leader ourselves.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const metadata = await admin.fetchTopicMetadata({ topics: [topic] }).catch(() => undefined);
      const partitionsOf = metadata?.topics[0]?.partitions ?? [];
      if (partitionsOf.length === partitions && partitionsOf.every((p) => p.leader >= 0)) return;
      if (Date.now() > deadline)
        throw new Error(`topic ${topic} has no leader for every partition after 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  });
}

/** Partitions of `topic` whose ISR is smaller than the replica set. */
export async function underReplicated(bootstrap: string, topics: string[]): Promise<string[]> {
  return withAdmin(bootstrap, async (admin) => {
    const metadata = await admin.fetchTopicMetadata({ topics });
    return metadata.topics.flatMap((t) =>
      t.partitions
        .filter((p) => p.isr.length < p.replicas.length)
        .map((p) => `${t.name}-${p.partitionId} isr=${p.isr.join(',')}`),
    );
  });
}

/**
 * Reads `topic` from the beginning until `expected` values arrived (60 s at most), then one second
 * more so that anything beyond `expected` shows up too. read_committed unless asked otherwise.
 */
export async function consumeValues(
  bootstrap: string,
  topic: string,
  expected: number,
  isolation: 'read_committed' | 'read_uncommitted' = 'read_committed',
): Promise<string[]> {
  const values: string[] = [];
  const consumer = kafkaClient(bootstrap).consumer({
    groupId: `${topic}-${isolation}-${Date.now()}`,
    readUncommitted: isolation === 'read_uncommitted',
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`read ${values.length} of ${expected} from ${topic}`)),
      60_000,
    );
    void consumer.run({
      eachMessage: async ({ message }) => {
        values.push(message.value!.toString());
        if (values.length >= expected) {
          clearTimeout(timer);
          resolve();
        }
      },
    });
  });
  await new Promise((r) => setTimeout(r, 1_000));
  await consumer.disconnect();
  return values;
}
