// Mutations of a Produce request frame, of four kinds: bytes anywhere after the API key; one
// batch edited in place (the request's structure intact), or its length prefix; a partition's
// records replaced; the request's structure changed and encoded again with the shared codec (a
// well-formed request the broker must judge: partitions and topics twice, unknown partitions and
// topics, acks, a transactional id, timeouts, no topics).
import {
  decodeProduceRequest,
  decodeRequestHeader,
  encodeProduceRequest,
  type ProducePartitionData,
  type ProduceRequest,
} from '@walproxy/shared';
import { editRecordsLength, framed, type Mutated, mutateBatch, mutateFrame, type Rng } from './mutations.js';

export interface DecodedProduce {
  headerLength: number;
  request: ProduceRequest;
}

/** The request as the codec reads it, or undefined for bytes it cannot read. */
export function decodeProduce(frame: Buffer): DecodedProduce | undefined {
  try {
    const payload = frame.subarray(4);
    const version = payload.readInt16BE(2);
    const header = decodeRequestHeader(payload);
    return {
      headerLength: header.headerLength,
      request: decodeProduceRequest(payload.subarray(header.headerLength), version),
    };
  } catch {
    return undefined;
  }
}

/** What a structural mutation may rename a topic to. */
export interface TopicChoices {
  /** For v3-12: names, existing or not. */
  names: readonly string[];
  /** For v13+: ids, existing or not (random ids are added). */
  ids: readonly string[];
}

/** A copy of the decoded request whose records are still views of the frame. */
function copyOf(request: ProduceRequest): ProduceRequest {
  return {
    ...request,
    topicData: request.topicData.map((t) => ({
      ...t,
      partitionData: t.partitionData.map((p): ProducePartitionData => ({ ...p })),
    })),
  };
}

/** One mutation of a Produce request frame (size prefix included) that the codec reads. */
export function mutateProduceRequest(rng: Rng, frame: Buffer, topics: TopicChoices): Mutated {
  const decoded = decodeProduce(frame);
  if (decoded === undefined) throw new Error('the base frame must be a Produce request the codec reads');
  const version = frame.readInt16BE(6);
  const family = rng.int(4);
  // Anywhere after the API key (the pipe sends other keys to other filters).
  if (family === 0) return mutateFrame(rng, frame, 6);
  const all = decoded.request.topicData.flatMap((t) => t.partitionData);
  if (family === 1) {
    const target = rng.pick(all.filter((p) => p.records !== null));
    if (rng.chance(0.2)) {
      const m = editRecordsLength(rng, frame, target.records!, version >= 9);
      return { bytes: m.bytes, what: `partition ${target.index}: ${m.what}` };
    }
    const bytes = Buffer.from(frame);
    const offset = target.records!.byteOffset - frame.byteOffset;
    const what = mutateBatch(rng, bytes, offset, target.records!.length);
    return { bytes, what: `partition ${target.index}: ${what}` };
  }
  const request = copyOf(decoded.request);
  const partitions = request.topicData.flatMap((t) => t.partitionData);
  const target = rng.pick(partitions);
  const other = rng.pick(partitions).records ?? Buffer.alloc(0);
  let what: string;
  if (family === 2) {
    const records = target.records ?? Buffer.alloc(0);
    switch (rng.int(6)) {
      case 0: {
        const cut = rng.int(records.length);
        target.records = records.subarray(0, cut);
        what = `records cut to ${cut} bytes`;
        break;
      }
      case 1:
        target.records = Buffer.concat([records, other]);
        what = 'a second batch';
        break;
      case 2:
        target.records = Buffer.concat([records, rng.bytes(rng.range(1, 70))]);
        what = 'garbage after the batch';
        break;
      case 3:
        target.records = Buffer.alloc(0);
        what = 'empty records';
        break;
      case 4:
        target.records = null;
        what = 'null records';
        break;
      default:
        target.records = other;
        what = "another partition's batch";
        break;
    }
    what = `partition ${target.index}: ${what}`;
  } else {
    const topic = rng.pick(request.topicData);
    switch (rng.int(8)) {
      case 0:
        topic.partitionData.push({ index: target.index, records: other });
        what = `partition ${target.index} twice`;
        break;
      case 1:
        request.topicData.push({
          ...topic,
          partitionData: topic.partitionData.map((p) => ({ ...p, records: other })),
        });
        what = 'a topic twice';
        break;
      case 2: {
        const index = rng.pick([3, 99, -1, 0x7fff_ffff]);
        target.index = index;
        what = `partition index ${index}`;
        break;
      }
      case 3:
        if (version >= 13) {
          topic.topicId = rng.chance(0.3) ? rng.bytes(16).toString('hex') : rng.pick(topics.ids);
          what = `topic id ${topic.topicId}`;
        } else {
          topic.name = rng.pick(topics.names);
          what = `topic name '${topic.name}'`;
        }
        break;
      case 4: {
        const acks = rng.pick([0, 1, -1, 2, -2]);
        request.acks = acks;
        what = `acks ${acks}`;
        break;
      }
      case 5:
        request.transactionalId = 'fuzz-tx';
        what = 'a transactional id';
        break;
      case 6:
        request.timeoutMs = rng.pick([0, -1, 0x7fff_ffff]);
        what = `timeout ${request.timeoutMs}`;
        break;
      default:
        request.topicData = [];
        what = 'no topics';
        break;
    }
  }
  const payload = frame.subarray(4);
  return {
    bytes: framed(
      Buffer.concat([payload.subarray(0, decoded.headerLength), encodeProduceRequest(request, version)]),
    ),
    what,
  };
}
