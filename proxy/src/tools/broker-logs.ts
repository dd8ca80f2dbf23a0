// Batch headers of a broker's partition logs (`<log.dir>/<topic>-<partition>/*.log`), read header
// by header (61 bytes per batch, the records are skipped), for `wal verify --data-dir`.
import { closeSync, existsSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import path from 'node:path';

export interface LogBatchHeader {
  baseOffset: number;
  lastOffset: number;
  /** The batch's CRC field (CRC-32C of bytes 21..end). */
  crc: number;
  /** Bytes of the whole batch: Length + 12. */
  size: number;
}

export interface PartitionLog {
  /** Where it was read, for messages. */
  dir: string;
  batches: LogBatchHeader[];
}

/** The logs of a partition on the brokers whose data directories were given. */
export interface BrokerLogs {
  partitionLogs(topic: string, partition: number): PartitionLog[];
}

const HEADER = 61;

/** Complete batches of one segment file, in file order; a partial batch at the end is ignored. */
export function readSegmentHeaders(file: string): LogBatchHeader[] {
  const fd = openSync(file, 'r');
  const out: LogBatchHeader[] = [];
  try {
    const size = statSync(file).size;
    const head = Buffer.alloc(HEADER);
    for (let pos = 0; pos + HEADER <= size; ) {
      if (readSync(fd, head, 0, HEADER, pos) < HEADER) break;
      const length = head.readInt32BE(8);
      const batchSize = length + 12;
      if (length < HEADER - 12 || pos + batchSize > size) break;
      const baseOffset = Number(head.readBigInt64BE(0));
      out.push({
        baseOffset,
        lastOffset: baseOffset + head.readInt32BE(23),
        crc: head.readUInt32BE(17),
        size: batchSize,
      });
      pos += batchSize;
    }
  } finally {
    closeSync(fd);
  }
  return out;
}

/** Reads (and caches) partition logs from Kafka `log.dirs`. */
export class DataDirLogs implements BrokerLogs {
  private readonly cache = new Map<string, PartitionLog[]>();
  constructor(private readonly dataDirs: readonly string[]) {}

  partitionLogs(topic: string, partition: number): PartitionLog[] {
    const name = `${topic}-${partition}`;
    let logs = this.cache.get(name);
    if (logs === undefined) {
      logs = [];
      for (const dataDir of this.dataDirs) {
        const dir = path.join(dataDir, name);
        if (!existsSync(dir)) continue;
        const segments = readdirSync(dir)
          .filter((f) => f.endsWith('.log'))
          .sort();
        logs.push({ dir, batches: segments.flatMap((s) => readSegmentHeaders(path.join(dir, s))) });
      }
      this.cache.set(name, logs);
    }
    return logs;
  }
}
