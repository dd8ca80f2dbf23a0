import { describe, expect, it } from 'vitest';
import { metadataPartitionFor } from '../../src/metadata/wal-metadata-publisher.js';

// The metadata topic as Kafka assigns three partitions over brokers 1-3: each broker is the
// preferred leader (first replica) of one.
const threeBrokers = [
  { partitionId: 0, leader: 2, replicas: [2, 3, 1] },
  { partitionId: 1, leader: 3, replicas: [3, 1, 2] },
  { partitionId: 2, leader: 1, replicas: [1, 2, 3] },
];

describe('metadataPartitionFor', () => {
  it('writes to the partition the sidecar broker is the preferred leader of', () => {
    expect(metadataPartitionFor(threeBrokers, 1)).toBe(2);
    expect(metadataPartitionFor(threeBrokers, 2)).toBe(0);
    expect(metadataPartitionFor(threeBrokers, 3)).toBe(1);
  });

  it('keeps that partition while leadership is elsewhere (the broker restarting): the choice is stable', () => {
    const moved = threeBrokers.map((p) => (p.partitionId === 2 ? { ...p, leader: 2 } : p));
    expect(metadataPartitionFor(moved, 1)).toBe(2);
  });

  it('takes a partition the broker leads when it is no partition’s first replica', () => {
    const reassigned = [
      { partitionId: 0, leader: 4, replicas: [2, 3, 4] },
      { partitionId: 1, leader: 3, replicas: [3, 2, 4] },
    ];
    expect(metadataPartitionFor(reassigned, 4)).toBe(0);
  });

  it('falls back to a fixed partition by broker id on a broker with no replica of the topic', () => {
    expect(metadataPartitionFor(threeBrokers, 7)).toBe(1);
    expect(metadataPartitionFor(threeBrokers, 9)).toBe(0);
    // Listed out of order, the choice is the same.
    expect(metadataPartitionFor([...threeBrokers].reverse(), 7)).toBe(1);
  });

  it('leaves the choice to the partitioner when the topic has no partitions listed', () => {
    expect(metadataPartitionFor([], 1)).toBeUndefined();
  });
});
