// What a sidecar can tell about its broker's partitions from the Metadata it reads anyway (the
// topic-id lookups of topic-names.ts): how many of the partitions its broker leads have fewer
// in-sync replicas than replicas. Kafka's own UnderReplicatedPartitions (kafka.server:
// ReplicaManager) counts the same way, on the leader, so the sidecars' figures add up to the
// cluster's without counting a partition twice.
import type { MetadataResponse } from '@walproxy/shared';

export interface PartitionHealth {
  /** Partitions the broker leads, of the topics the Metadata answer named. */
  led: number;
  /** Of those, partitions whose ISR is smaller than their replica set (a follower fell behind or is gone). */
  underReplicated: number;
}

/**
 * Counts from one Metadata answer of broker `brokerId`. Topics the answer refused (an error code:
 * no Describe ACL, being deleted) are not counted; a partition is counted whatever its own error
 * code (REPLICA_NOT_AVAILABLE comes with its leader and lists), by its leader only.
 */
export function partitionHealth(metadata: MetadataResponse, brokerId: number): PartitionHealth {
  let led = 0;
  let underReplicated = 0;
  for (const topic of metadata.topics) {
    if (topic.errorCode !== 0) continue;
    for (const p of topic.partitions) {
      if (p.leaderId !== brokerId) continue;
      led++;
      if (p.isrNodes.length < p.replicaNodes.length) underReplicated++;
    }
  }
  return { led, underReplicated };
}
