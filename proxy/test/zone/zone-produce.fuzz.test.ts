// Mutated Produce requests, from frames captured on a real cluster, through both sides of
// zone-local produce the way the zone listeners' pipes call them (issue #24, item 5): the
// producer's zone egress (ZoneProduce) towards a leader in another zone, whose topic `wal-fuzz` it
// has accepted already (its batches go by reference), then the leader's zone ingress
// (ProduceFillFilter). For every case:
// - the broker gets the client's bytes: the request as sent, references filled back to the exact
//   batches, a client-sent reference's magic changed so that no leader fills it (the broker
//   refuses that partition either way); also for bytes the codec refuses, which the broker judges;
//   the only other outcome is a ProtocolError (the pipe closes the connection), only for a request
//   whose acks cannot be found, which the broker cannot read either;
// - never a crash, and no decision that hangs;
// - the zone bucket holds only CRC-valid batches the client sent, one per referenced partition;
// - the response reaches the client as the broker sent it, except that a referenced partition the
//   broker refused as INVALID_RECORD / CORRUPT_MESSAGE with nothing to tell a bad batch from an
//   unfilled reference is answered NOT_ENOUGH_REPLICAS (not appended, retriable): the client's
//   retry on that connection then goes as its bytes and gets the broker's own answer, while every
//   other connection still goes by reference (a bad batch costs only its own producer).
import { ApiKey, ErrorCode, isProduceReference, parseWalObject, peekRequestKey } from '@walproxy/shared';
import { describe, expect, it } from 'vitest';
import { mutateProduceRequest } from '../../../e2e/src/fuzz/produce-mutations.js';
import type { FilterConnection, RequestDecision, RequestInfo } from '../../src/net/frame-filter.js';
import { caseName, fuzzCases, Rng } from '../filters/fuzz-support.js';
import {
  acceptWalFuzz,
  allowedThrow,
  brokerResponse,
  decodeRequest,
  decodeResponse,
  fixtures,
  isForward,
  log,
  neutralizedAsSZ,
  settled,
  TOPIC_CHOICES,
  type ZonePair,
  zonePair,
} from './zone-fuzz-support.js';

const FILE = 'zone-produce.fuzz';
const CASES = 1_200;

/** The frame the broker gets for `frame` through both sidecars, or what went wrong. */
async function throughBoth(
  pair: ZonePair,
  info: RequestInfo,
  frame: Buffer,
  connection: FilterConnection,
): Promise<{ upstream: Buffer; referenced: boolean } | { closed: true } | { problem: string }> {
  let decision: RequestDecision | Promise<RequestDecision>;
  try {
    decision = pair.egress.onRequest!(info, frame, connection);
  } catch (error) {
    return allowedThrow(error, frame)
      ? { closed: true }
      : { problem: `zone egress threw ${(error as Error).stack}` };
  }
  const decided = await settled(decision).catch((error: Error) => error);
  if (decided instanceof Error) return { problem: `zone egress rejected ${decided.stack}` };
  if (decided === 'hung') return { problem: 'zone egress decision hung' };
  if (!isForward(decided)) return { problem: 'zone egress answered locally' };
  const sent = decided.frame;
  const request = decodeRequest(sent, info.apiVersion);
  const referenced =
    request?.topicData.some((t) => t.partitionData.some((p) => isProduceReference(p.records))) ?? false;
  let filled: RequestDecision | Promise<RequestDecision>;
  try {
    filled = pair.fill.onRequest(info, sent, connection);
  } catch (error) {
    return { problem: `leader side threw on what the zone egress sent: ${(error as Error).stack}` };
  }
  const leaderDecided = await settled(filled).catch((error: Error) => error);
  if (leaderDecided instanceof Error) return { problem: `leader side rejected ${leaderDecided.stack}` };
  if (leaderDecided === 'hung') return { problem: 'leader side decision hung' };
  if (!isForward(leaderDecided))
    return { problem: 'the leader side could not fill what the zone egress stored' };
  return { upstream: leaderDecided.frame, referenced };
}

/** How many cases went each way: every way must be reached for the fuzz to say anything. */
const outcomes = { referenced: 0, asBytes: 0, retriedAsBytes: 0 };

/** Runs one case; returns what went wrong, if anything. */
async function runCase(index: number): Promise<string[]> {
  const rng = Rng.forCase(FILE, index);
  const base = rng.pick(fixtures.produce);
  const { bytes: frame, what } = mutateProduceRequest(rng, base.request, TOPIC_CHOICES);
  const name = caseName(FILE, index, `${base.name}, ${what}`);
  let info: RequestInfo;
  try {
    info = peekRequestKey(frame.subarray(4));
  } catch {
    return [];
  }
  if (info.apiKey !== ApiKey.Produce || info.apiVersion < 0) return [];
  const problems: string[] = [];
  const pair = zonePair();
  try {
    const connection: FilterConnection = { log };
    await acceptWalFuzz(pair, connection);
    const sent = Buffer.from(frame);
    const clientRequest = decodeRequest(frame, info.apiVersion);
    const expected = neutralizedAsSZ(sent, clientRequest);

    const first = await throughBoth(pair, info, frame, connection);
    if ('problem' in first) return [`${name}: ${first.problem}`];
    if ('closed' in first) return [];
    if (!first.upstream.equals(expected)) problems.push(`${name}: the broker did not get the client's bytes`);
    outcomes[first.referenced ? 'referenced' : 'asBytes']++;
    if (!frame.equals(sent)) problems.push(`${name}: the client's frame was changed in place`);

    // The zone bucket: only CRC-valid batches the client sent
    await pair.writer.flush();
    const clientBatches = new Set(
      (clientRequest?.topicData ?? []).flatMap((t) =>
        t.partitionData.flatMap((p) => (p.records ? [p.records.toString('hex')] : [])),
      ),
    );
    for (const [key, object] of pair.zoneStore.objects) {
      for (const entry of parseWalObject(object).entries) {
        const stored = object.subarray(entry.position, entry.position + entry.length);
        if (!clientBatches.has(stored.toString('hex')))
          problems.push(`${name}: ${key} stores a batch the client did not send`);
        if (entry.crc !== stored.readUInt32BE(17))
          problems.push(`${name}: ${key} stores a batch under another CRC`);
      }
    }

    if (clientRequest === undefined || clientRequest.acks === 0) return problems;
    // The broker answers what it got; the client gets that answer
    const brokerAnswer = brokerResponse(rng, info, decodeRequest(first.upstream, info.apiVersion)!);
    let out: Buffer;
    try {
      out = (await settled(pair.egress.onResponse!(info, brokerAnswer))) as Buffer;
    } catch (error) {
      return [...problems, `${name}: onResponse threw ${(error as Error).stack}`];
    }
    if (out.equals(brokerAnswer)) return problems;
    const broker = decodeResponse(info, brokerAnswer);
    const client = decodeResponse(info, out);
    let retry = false;
    for (const [t, topic] of broker.responses.entries()) {
      for (const [k, p] of topic.partitionResponses.entries()) {
        const got = client.responses[t]?.partitionResponses[k];
        if (got?.errorCode === p.errorCode) continue;
        const refusal = p.errorCode === ErrorCode.INVALID_RECORD || p.errorCode === ErrorCode.CORRUPT_MESSAGE;
        if (refusal && first.referenced && got?.errorCode === ErrorCode.NOT_ENOUGH_REPLICAS) retry = true;
        else
          problems.push(
            `${name}: partition ${p.index} answered ${got?.errorCode}, the broker said ${p.errorCode}`,
          );
      }
    }
    if (!retry) return problems;
    // The client retries on the same connection: bytes now, and the broker's own answer
    outcomes.retriedAsBytes++;
    const again: RequestInfo = { ...info };
    const second = await throughBoth(pair, again, frame, connection);
    if (!('upstream' in second)) return [...problems, `${name}: the retry ${JSON.stringify(second)}`];
    if (second.referenced || !second.upstream.equals(expected))
      problems.push(`${name}: the retry did not go as the client's bytes`);
    const secondAnswer = brokerResponse(rng, again, decodeRequest(second.upstream, info.apiVersion)!);
    const secondOut = (await settled(pair.egress.onResponse!(again, secondAnswer))) as Buffer;
    if (!secondOut.equals(secondAnswer)) problems.push(`${name}: the retry's answer is not the broker's`);
    // And another producer of that leader still goes by reference
    if (pair.zoneProduce.inFallback(2))
      problems.push(`${name}: one bad batch sent the whole leader to bytes`);
    return problems;
  } finally {
    await pair.writer.close();
  }
}

describe('zone-local produce, fuzzed with mutations of captured Produce v3–v13 requests', () => {
  it('references the captured requests and the leader side fills them back to the client’s bytes', async () => {
    for (const fixture of fixtures.produce) {
      const pair = zonePair();
      const connection: FilterConnection = { log };
      await acceptWalFuzz(pair, connection);
      const info = peekRequestKey(fixture.request.subarray(4));
      const result = await throughBoth(pair, info, fixture.request, connection);
      await pair.writer.close();
      expect(result, fixture.name).toMatchObject({ referenced: true });
      expect((result as { upstream: Buffer }).upstream.equals(fixture.request), fixture.name).toBe(true);
    }
  });

  it("gives the broker the client's bytes for every mutated request, and the client the broker's answer", async () => {
    const problems: string[] = [];
    for (const index of fuzzCases(CASES)) problems.push(...(await runCase(index)));
    expect(problems.slice(0, 20)).toEqual([]);
    expect(
      Object.values(outcomes).every((n) => n > 0),
      JSON.stringify(outcomes),
    ).toBe(true);
  });
});
