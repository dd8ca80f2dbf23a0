import { withAdmin } from '../clients/kafkajs.js';

/**
 * The fuzzers' topics, every partition led by broker 1 (the broker the mutated requests go to):
 * a WAL topic of three partitions, followers in both orders, and a one-partition topic outside
 * the WAL. Does not wait for leaders: kafkajs' wait trips over KRaft's lag, so callers wait on
 * the broker's own answers.
 */
export async function createFuzzTopics(
  bootstrap: string,
  walTopic: string,
  plainTopic: string,
): Promise<void> {
  await withAdmin(bootstrap, (admin) =>
    admin.createTopics({
      topics: [
        {
          topic: walTopic,
          replicaAssignment: [
            { partition: 0, replicas: [1, 2, 3] },
            { partition: 1, replicas: [1, 3, 2] },
            { partition: 2, replicas: [1, 2, 3] },
          ],
        },
        { topic: plainTopic, replicaAssignment: [{ partition: 0, replicas: [1, 3, 2] }] },
      ],
      waitForLeaders: false,
    }),
  );
}
