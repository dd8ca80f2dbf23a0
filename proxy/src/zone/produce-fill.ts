import { channel } from 'node:diagnostics_channel';
import { performance } from 'node:perf_hooks';
import {
  ApiKey,
  decodeProduceReference,
  decodeProduceRequest,
  decodeRequestHeader,
  ErrorCode,
  encodeFrame,
  encodeProduceRequest,
  encodeProduceResponse,
  encodeResponseHeader,
  isProduceReference,
  type ProducePartitionData,
  type ProduceReference,
  type ProduceRequest,
  peekProduceAcks,
  produceReferenceMismatch,
  responseHeaderVersion,
} from '@walproxy/shared';
import type { Logger } from '../log.js';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import type { FilterConnection, FrameFilter, RequestDecision, RequestInfo } from '../net/frame-filter.js';
import type { WalRangeReader } from '../wal/range-reader.js';
import type { WalLocation } from '../wal/wal-writer.js';
import { ZONE_PRODUCE_CHANNELS, type ZoneProduceFillEvent } from './channels.js';

const fillChannel = channel(ZONE_PRODUCE_CHANNELS.fill);

/** Produce versions that carry references: the ones walproxy decodes (magic v2 only, v3+). */
export const PRODUCE_REFERENCE_VERSIONS = { min: 3, max: 13 } as const;

export const PRODUCE_FILL_DEFAULTS = {
  /** A fill that has not read its batches by then answers NOT_ENOUGH_REPLICAS (the producer retries). */
  timeoutMs: 1_000,
} as const;

export interface ProduceFillStats {
  /** Requests whose references were all filled and that went to the broker. */
  requestsFilled: number;
  batchesFilled: number;
  bytesFilled: number;
  /** Requests answered NOT_ENOUGH_REPLICAS without reaching the broker, because a reference could not be filled. */
  requestsRefused: number;
  /** References that could not be filled, by why. */
  failures: {
    /** Not a reference this build reads. */
    undecodable: number;
    /** A store not allowed by --wal-read-store-url (nor our own). */
    storeNotAllowed: number;
    /** The GET failed. */
    readFailed: number;
    timedOut: number;
    /** The bytes read are not the batch the reference stands for. */
    mismatch: number;
  };
  /** References in an acks=0 request: forwarded as they came (the broker refuses them, answering nobody). */
  acksZeroReferences: number;
  /** Produce requests the codec could not read: forwarded as they came, for the broker to judge. */
  requestsNotDecoded: number;
  /** From the request to its filled frame (or its refusal): sum, count and maximum, milliseconds. */
  fillMsTotal: number;
  fillMsMax: number;
}

type FailureReason = keyof ProduceFillStats['failures'];

class FillFailure extends Error {
  constructor(
    readonly reason: FailureReason,
    message: string,
  ) {
    super(message);
  }
}

export interface ProduceFillOptions {
  /** The reader for a store URL a reference names, or undefined when that store may not be read. */
  readerFor: (store: string) => WalRangeReader | undefined;
  timeoutMs?: number;
  log: Logger;
}

/**
 * Leader side of zone-local produce (docs/zone-local.md), on the zone ingress only: peers' zone
 * egresses, authenticated by the peer CA, are the only ones whose references are honoured; on a
 * client-facing listener a reference reaches the broker as it came, and the broker refuses it.
 *
 * A Produce partition whose Records field is a reference (shared/src/zone/produce-references.ts)
 * is filled with the batch the producer's zone sidecar stored: one ranged GET per object (the
 * range reader's, shared with the follower side), checked against the reference (size, header,
 * CRC-32C), and the request re-encoded with the batch in its place — the exact bytes the producer
 * sent, since the codec round-trips byte for byte. The broker then judges it as on a direct
 * connection (ACLs, quotas, sequence numbers, transactions).
 *
 * If any reference cannot be filled, nothing of the request reaches the broker: every partition
 * is answered NOT_ENOUGH_REPLICAS, retriable and meaning "not appended", so the producer's retry
 * duplicates nothing; the producer's zone sidecar reads that answer and sends bytes to this leader
 * for a while (zone-produce.ts).
 *
 * Filled batches are offered to the WAL's Produce filter through `storedElsewhere`: it indexes
 * them at their place in the producer's zone bucket, so this leader's followers get references to
 * that object and nothing is uploaded twice.
 */
export class ProduceFillFilter implements FrameFilter {
  readonly apiKeys = new Set<number>([ApiKey.Produce]);
  readonly stats: ProduceFillStats = {
    requestsFilled: 0,
    batchesFilled: 0,
    bytesFilled: 0,
    requestsRefused: 0,
    failures: { undecodable: 0, storeNotAllowed: 0, readFailed: 0, timedOut: 0, mismatch: 0 },
    acksZeroReferences: 0,
    requestsNotDecoded: 0,
    fillMsTotal: 0,
    fillMsMax: 0,
  };
  private readonly filled = new WeakMap<RequestInfo, Map<string, WalLocation>>();
  private readonly timeoutMs: number;
  /** When the last refusal was logged: one warning per 10 s, not one per request. */
  private lastWarnMs = 0;

  constructor(private readonly options: ProduceFillOptions) {
    this.timeoutMs = options.timeoutMs ?? PRODUCE_FILL_DEFAULTS.timeoutMs;
  }

  /** Where a filled partition's batch is stored (for the WAL's Produce filter), by topic name or id. */
  storedElsewhere(info: RequestInfo, topicKey: string, partition: number): WalLocation | undefined {
    return this.filled.get(info)?.get(`${topicKey}\u0000${partition}`);
  }

  onRequest(
    info: RequestInfo,
    frame: Buffer,
    _connection: FilterConnection,
  ): RequestDecision | Promise<RequestDecision> {
    const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
    // Throws only when acks cannot be found: the pipe must know whether an answer comes, and the
    // broker cannot read such a request either (it closes the connection).
    const expectResponse = peekProduceAcks(payload) !== 0;
    const forward: RequestDecision = { action: 'forward', frame, expectResponse };
    if (info.apiVersion < PRODUCE_REFERENCE_VERSIONS.min || info.apiVersion > PRODUCE_REFERENCE_VERSIONS.max)
      return forward;
    let header: { headerLength: number };
    let request: ProduceRequest;
    try {
      header = decodeRequestHeader(payload);
      request = decodeProduceRequest(payload.subarray(header.headerLength), info.apiVersion);
    } catch (error) {
      // As on the client ingress (produce-wal.ts): the codec is stricter than Kafka, and what it
      // refuses the broker judges, answering per partition as stock does (or closing the
      // connection). Nothing is filled: a reference in it reaches the broker unfilled, and the
      // broker refuses that partition (magic 0x57 is no Kafka magic), appending nothing of it.
      this.stats.requestsNotDecoded++;
      this.options.log.debug(
        { error: (error as Error).message },
        'zone-local produce: Produce request not decoded; forwarded as sent',
      );
      return forward;
    }
    const referenced: Array<{ topicKey: string; partition: ProducePartitionData }> = [];
    for (const topic of request.topicData) {
      for (const partition of topic.partitionData) {
        if (isProduceReference(partition.records))
          referenced.push({ topicKey: topic.topicId ?? topic.name ?? '', partition });
      }
    }
    if (referenced.length === 0) return forward;
    if (!expectResponse) {
      // Never sent by a zone sidecar (acks=0 always goes as bytes): no answer could say "retry".
      this.stats.acksZeroReferences += referenced.length;
      return forward;
    }
    return this.fill(info, payload.subarray(0, header.headerLength), request, referenced);
  }

  private async fill(
    info: RequestInfo,
    headerBytes: Buffer,
    request: ProduceRequest,
    referenced: Array<{ topicKey: string; partition: ProducePartitionData }>,
  ): Promise<RequestDecision> {
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    let filledBytes: number | undefined;
    try {
      const read = this.readAll(referenced);
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new FillFailure('timedOut', `not read within ${this.timeoutMs} ms`)),
          this.timeoutMs,
        );
      });
      const batches = await Promise.race([read, deadline]);
      const locations = new Map<string, WalLocation>();
      let bytes = 0;
      for (const [i, { topicKey, partition }] of referenced.entries()) {
        const { reference, batch } = batches[i]!;
        partition.records = batch;
        bytes += batch.length;
        locations.set(`${topicKey}\u0000${partition.index}`, {
          store: reference.store,
          objectKey: reference.objectKey,
          position: reference.position,
          length: reference.batchSize,
          objectSize: reference.objectSize,
          uploadedAtMs: Date.now(),
        });
      }
      this.filled.set(info, locations);
      this.stats.requestsFilled++;
      this.stats.batchesFilled += referenced.length;
      this.stats.bytesFilled += bytes;
      filledBytes = bytes;
      return {
        action: 'forward',
        frame: encodeFrame(headerBytes, encodeProduceRequest(request, info.apiVersion)),
        expectResponse: true,
      };
    } catch (error) {
      const failure =
        error instanceof FillFailure ? error : new FillFailure('readFailed', (error as Error).message);
      this.stats.failures[failure.reason]++;
      this.stats.requestsRefused++;
      const now = Date.now();
      if (now - this.lastWarnMs > 10_000) {
        this.lastWarnMs = now;
        this.options.log.warn(
          { reason: failure.reason, error: failure.message, refused: this.stats.requestsRefused },
          'zone-local produce: a reference could not be filled; answering NOT_ENOUGH_REPLICAS (nothing appended)',
        );
      }
      return { action: 'respond', response: refusal(info, request, failure.message) };
    } finally {
      clearTimeout(timer);
      const ms = performance.now() - started;
      this.stats.fillMsTotal += ms;
      this.stats.fillMsMax = Math.max(this.stats.fillMsMax, ms);
      if (fillChannel.hasSubscribers) {
        fillChannel.publish({
          batches: referenced.length,
          bytes: filledBytes ?? 0,
          durationMs: ms,
          outcome: filledBytes === undefined ? 'refused' : 'filled',
        } satisfies ZoneProduceFillEvent);
      }
    }
  }

  /** Reads every referenced batch, one GET per object; rejects with a FillFailure. */
  private async readAll(
    referenced: Array<{ partition: ProducePartitionData }>,
  ): Promise<Array<{ reference: ProduceReference; batch: Buffer }>> {
    const references = referenced.map(({ partition }) => {
      try {
        return decodeProduceReference(partition.records!);
      } catch (error) {
        throw new FillFailure('undecodable', (error as Error).message);
      }
    });
    const byObject = new Map<string, { reader: WalRangeReader; objectKey: string; at: number[] }>();
    for (const [i, reference] of references.entries()) {
      const key = `${reference.store}\u0000${reference.objectKey}`;
      let group = byObject.get(key);
      if (group === undefined) {
        const reader = this.options.readerFor(reference.store);
        if (reader === undefined)
          throw new FillFailure(
            'storeNotAllowed',
            `store ${reference.store} is not one --wal-read-store-url allows`,
          );
        group = { reader, objectKey: reference.objectKey, at: [] };
        byObject.set(key, group);
      }
      group.at.push(i);
    }
    const out = new Array<{ reference: ProduceReference; batch: Buffer }>(references.length);
    await Promise.all(
      [...byObject.values()].map(async ({ reader, objectKey, at }) => {
        let buffers: Buffer[];
        try {
          buffers = await reader.read(
            objectKey,
            at.map((i) => ({ offset: references[i]!.position, length: references[i]!.batchSize })),
          );
        } catch (error) {
          throw new FillFailure('readFailed', (error as Error).message);
        }
        for (const [k, i] of at.entries()) {
          const reference = references[i]!;
          const mismatch = produceReferenceMismatch(reference, buffers[k]!);
          if (mismatch !== undefined)
            throw new FillFailure('mismatch', `${objectKey} at ${reference.position}: ${mismatch}`);
          out[i] = { reference, batch: buffers[k]! };
        }
      }),
    );
    return out;
  }
}

/** NOT_ENOUGH_REPLICAS for every partition of the request: retriable, and nothing was appended. */
function refusal(info: RequestInfo, request: ProduceRequest, why: string): Buffer {
  const v = info.apiVersion;
  const body = encodeProduceResponse(
    {
      responses: request.topicData.map((topic) => ({
        name: topic.name,
        topicId: topic.topicId,
        partitionResponses: topic.partitionData.map((p) => ({
          index: p.index,
          errorCode: ErrorCode.NOT_ENOUGH_REPLICAS,
          baseOffset: -1n,
          logAppendTimeMs: -1n,
          logStartOffset: -1n,
          recordErrors: [],
          errorMessage: `walproxy: zone-local produce could not be filled (${why}); not appended, retry`,
        })),
      })),
      throttleTimeMs: 0,
    },
    v,
  );
  const header = encodeResponseHeader(
    { correlationId: info.correlationId },
    responseHeaderVersion(ApiKey.Produce, v)!,
  );
  return encodeFrame(header, body);
}
