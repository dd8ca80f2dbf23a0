// Mutated Produce requests as a zone ingress receives them, through the leader side of zone-local
// produce (ProduceFillFilter) the way the pipe calls it (issue #24, item 5). The bases are the
// requests captured on a real cluster, as clients sent them and as a producer's zone sidecar
// forwards them (`wal-fuzz` batches replaced by references to its zone's bucket). For every case:
// - the request goes to the broker as it came, except that references are replaced by exactly the
//   stored batches they stand for (nothing else of the request changes), also for bytes the codec
//   refuses, which the broker judges (it refuses an unfilled reference: magic 0x57 is no Kafka
//   magic);
// - or, only when a reference in it cannot be filled, nothing goes to the broker and every
//   partition is answered NOT_ENOUGH_REPLICAS (not appended, retriable), under the request's
//   correlation id;
// - or a ProtocolError (the pipe closes the connection), only for a request whose acks cannot be
//   found, which the broker cannot read either;
// - never a crash, and no decision that hangs.
import {
  ApiKey,
  decodeProduceReference,
  ErrorCode,
  isProduceReference,
  type ProduceRequest,
  peekProduceAcks,
  peekRequestKey,
} from '@walproxy/shared';
import { describe, expect, it } from 'vitest';
import { mutateProduceRequest } from '../../../e2e/src/fuzz/produce-mutations.js';
import type { FilterConnection, RequestDecision, RequestInfo } from '../../src/net/frame-filter.js';
import { PRODUCE_REFERENCE_VERSIONS } from '../../src/zone/produce-fill.js';
import { caseName, fuzzCases, plain, Rng } from '../filters/fuzz-support.js';
import {
  acceptWalFuzz,
  allowedThrow,
  decodeRequest,
  decodeResponse,
  everyReferenceFills,
  fixtures,
  isForward,
  log,
  settled,
  TOPIC_CHOICES,
  type ZonePair,
  zonePair,
} from './zone-fuzz-support.js';

const FILE = 'produce-fill.fuzz';
const CASES = 1_600;

/** One pair of sidecars for every case, and what its zone egress forwards for each captured request. */
async function bases(): Promise<{ pair: ZonePair; frames: Array<{ name: string; frame: Buffer }> }> {
  const pair = zonePair();
  const connection: FilterConnection = { log };
  await acceptWalFuzz(pair, connection);
  const frames: Array<{ name: string; frame: Buffer }> = [];
  for (const fixture of fixtures.produce) {
    frames.push({ name: `${fixture.name} as sent`, frame: fixture.request });
    const info = peekRequestKey(fixture.request.subarray(4));
    const decision = (await pair.egress.onRequest!(info, fixture.request, connection)) as RequestDecision;
    if (!isForward(decision)) throw new Error('the zone egress answered a captured request');
    frames.push({ name: `${fixture.name} by reference`, frame: decision.frame });
  }
  return { pair, frames };
}

/** The request with every referenced partition's records replaced by what `filled` holds there. */
function withRecordsOf(request: ProduceRequest, filled: ProduceRequest): ProduceRequest {
  return {
    ...request,
    topicData: request.topicData.map((t, i) => ({
      ...t,
      partitionData: t.partitionData.map((p, k) =>
        isProduceReference(p.records)
          ? { ...p, records: filled.topicData[i]?.partitionData[k]?.records ?? null }
          : p,
      ),
    })),
  };
}

/** How many cases ended each way: every way must be reached for the fuzz to say anything. */
const outcomes = { filled: 0, refused: 0, asItCame: 0 };

async function runCase(pair: ZonePair, frames: Array<{ name: string; frame: Buffer }>, index: number) {
  const rng = Rng.forCase(FILE, index);
  const base = rng.pick(frames);
  const { bytes: frame, what } = mutateProduceRequest(rng, base.frame, TOPIC_CHOICES);
  const name = caseName(FILE, index, `${base.name}, ${what}`);
  let info: RequestInfo;
  try {
    info = peekRequestKey(frame.subarray(4));
  } catch {
    return [];
  }
  if (info.apiKey !== ApiKey.Produce || info.apiVersion < 0) return [];
  const sent = Buffer.from(frame);
  const inRange =
    info.apiVersion >= PRODUCE_REFERENCE_VERSIONS.min && info.apiVersion <= PRODUCE_REFERENCE_VERSIONS.max;
  const request = inRange ? decodeRequest(frame, info.apiVersion) : undefined;
  const references =
    request?.topicData.flatMap((t) => t.partitionData).filter((p) => isProduceReference(p.records)).length ??
    0;

  let decision: RequestDecision | Promise<RequestDecision>;
  try {
    decision = pair.fill.onRequest(info, frame, { log });
  } catch (error) {
    return allowedThrow(error, frame) ? [] : [`${name}: onRequest threw ${(error as Error).stack}`];
  }
  const decided = await settled(decision).catch((error: Error) => error);
  if (decided instanceof Error) return [`${name}: onRequest rejected ${decided.stack}`];
  if (decided === 'hung') return [`${name}: the decision hung`];
  const problems: string[] = [];
  if (!frame.equals(sent)) problems.push(`${name}: the request frame was changed in place`);
  let acks: number | undefined;
  try {
    acks = peekProduceAcks(frame.subarray(4));
  } catch {}
  const fills = request !== undefined && everyReferenceFills(request, pair.zoneStore);

  if (!isForward(decided)) {
    outcomes.refused++;
    // Refused: only for a reference that cannot be filled, every partition told to retry
    if (request === undefined || references === 0 || fills || acks === 0)
      problems.push(`${name}: answered locally a request it had to forward`);
    const response = decided.response;
    if (response.readInt32BE(4) !== info.correlationId)
      problems.push(`${name}: answered another correlation id`);
    try {
      const codes = decodeResponse(info, response).responses.flatMap((t) =>
        t.partitionResponses.map((p) => p.errorCode),
      );
      const partitions = request?.topicData.reduce((n, t) => n + t.partitionData.length, 0);
      if (codes.length !== partitions || codes.some((c) => c !== ErrorCode.NOT_ENOUGH_REPLICAS))
        problems.push(`${name}: the refusal does not answer every partition NOT_ENOUGH_REPLICAS`);
    } catch (error) {
      problems.push(`${name}: the refusal is no Produce response: ${(error as Error).message}`);
    }
    return problems;
  }

  if (acks !== undefined && decided.expectResponse !== (acks !== 0))
    problems.push(`${name}: expectResponse ${decided.expectResponse} for acks ${acks}`);
  const upstream = decided.frame;
  if (request === undefined || references === 0 || acks === 0) {
    // Nothing to fill (or the codec cannot read it, or no answer could say "retry"): as it came
    outcomes.asItCame++;
    if (!upstream.equals(sent)) problems.push(`${name}: forwarded bytes other than the ones it got`);
    return problems;
  }
  if (!fills) return [...problems, `${name}: filled a reference that does not stand for its stored batch`];
  // Filled: the same request, each reference replaced by the batch it stands for, nothing else
  outcomes.filled++;
  if (upstream.subarray(4, 8).compare(sent.subarray(4, 8)) !== 0)
    problems.push(`${name}: the filled request has another header`);
  const filled = decodeRequest(upstream, info.apiVersion);
  if (filled === undefined) return [...problems, `${name}: the filled request does not decode`];
  if (filled.topicData.some((t) => t.partitionData.some((p) => isProduceReference(p.records))))
    problems.push(`${name}: a reference reached the broker`);
  if (JSON.stringify(plain(withRecordsOf(request, filled))) !== JSON.stringify(plain(filled)))
    problems.push(`${name}: the filled request differs from the one received in more than its references`);
  for (const [t, topic] of request.topicData.entries()) {
    for (const [k, p] of topic.partitionData.entries()) {
      if (!isProduceReference(p.records)) continue;
      const batch = filled.topicData[t]!.partitionData[k]!.records!;
      const reference = decodeProduceReference(p.records);
      if (batch.length !== reference.batchSize || !batch.subarray(0, 61).equals(reference.header))
        problems.push(`${name}: partition ${p.index} was filled with a batch other than its reference's`);
    }
  }
  return problems;
}

describe('ProduceFillFilter, fuzzed with mutations of captured Produce v3–v13 requests and their references', () => {
  it('fills the captured requests’ references back to the client’s bytes', async () => {
    const { pair, frames } = await bases();
    for (const [i, { name, frame }] of frames.entries()) {
      const info = peekRequestKey(frame.subarray(4));
      const decision = await pair.fill.onRequest(info, frame, { log });
      const client = fixtures.produce[Math.floor(i / 2)]!.request;
      expect(isForward(decision) && decision.frame.equals(client), name).toBe(true);
    }
    await pair.writer.close();
  });

  it('forwards every mutated request as it came or filled exactly, or refuses it NOT_ENOUGH_REPLICAS only when a reference cannot be filled', async () => {
    const { pair, frames } = await bases();
    const problems: string[] = [];
    for (const index of fuzzCases(CASES)) problems.push(...(await runCase(pair, frames, index)));
    await pair.writer.close();
    expect(problems.slice(0, 20)).toEqual([]);
    expect(
      Object.values(outcomes).every((n) => n > 0),
      JSON.stringify(outcomes),
    ).toBe(true);
  });
});
