// A WAL produce's spans in a real tracing backend: Jaeger (`make jaeger`) and a cluster of its own
// on the three-zone network, so that, as in Kubernetes, each broker pod has its own localhost and
// a follower's fill runs in the follower's sidecar (on one shared loopback the follower connects to
// the leader's egress listener, and the fill would be traced by the leader). The sidecars export
// OTLP/HTTP to Jaeger, and its query API (what the Jaeger UI reads) lists the spans. The follower's
// fill joins the upload's trace through the span context the leader's sidecar carries in the
// Fetch response (shared/src/replication/wal-trace.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTopic, kafkaClient } from '../src/clients/kafkajs.js';
import { BROKER_IDS, KafkaCluster, RACKS } from '../src/cluster/kafka-cluster.js';
import { walSidecarArgs, walSidecarEnv } from '../src/cluster/wal-settings.js';
import { type Zone, ZoneNetwork } from '../src/net/zone-network.js';
import { type MotoServer, startMoto } from '../src/s3/moto.js';
import { Jaeger, type JaegerSpan } from '../src/tracing/jaeger.js';

// A durable-ack topic (wal-settings.ts): the trace shows the ack waiting for the upload.
const TOPIC = 'wal-durable-traces';
const tag = (span: JaegerSpan, key: string) => span.tags.find((t) => t.key === key)?.value;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const services = BROKER_IDS.map((id) => `walproxy-${id}`);

let zones: ZoneNetwork | undefined;
let moto: MotoServer | undefined;
let jaeger: Jaeger | undefined;
let cluster: KafkaCluster | undefined;

beforeAll(async () => {
  zones = ZoneNetwork.create(new Map(BROKER_IDS.map((id) => [id, RACKS[id] as Zone])));
  moto = await startMoto({ netns: zones.store.netns, host: zones.store.address });
  const s3 = { endpoint: moto.endpoint, bucket: 'walproxy-traces', prefix: 'wal/', walTopicGlob: 'wal-*' };
  await moto.createBucket(s3.bucket);
  // Jaeger in the root namespace, on the address the pods reach it at
  jaeger = await Jaeger.start({ host: zones.clientAddress });
  cluster = await KafkaCluster.start({
    zones,
    sidecarEnv: walSidecarEnv(),
    sidecarArgs: (id) =>
      walSidecarArgs(s3, [
        `--otlp-endpoint=${jaeger!.otlpEndpoint}`,
        `--otel-service-name=walproxy-${id}`,
        // Jaeger takes traces only; metrics go to Prometheus through /metrics.
        '--metrics-export-interval-ms=3600000',
      ]),
  });
}, 180_000);

afterAll(async () => {
  try {
    await cluster?.stop();
    await jaeger?.stop();
    await moto?.stop();
  } finally {
    zones?.remove();
  }
}, 60_000);

/** Polls `find` once a second for at most `timeoutMs` until it returns something. */
async function eventually<T>(find: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await find();
    if (found !== undefined || Date.now() > deadline) return found;
    await sleep(1_000);
  }
}

/** Whether some sidecar has sent references (its /counters). */
async function referencesSent(): Promise<boolean> {
  const counters = await Promise.all(BROKER_IDS.map((id) => cluster!.sidecarCounters(id)));
  return counters.some((c) => Number(c.wal?.fetchStrip?.referencesSent ?? 0) > 0);
}

describe('traces of a WAL produce in Jaeger', () => {
  it('shows a produce, its durable ack, the upload and seal, the leader strip and the follower fills as one story', async () => {
    // Given a WAL topic, one partition, on three brokers in three zones
    await createTopic(cluster!.bootstrap(), TOPIC, { partitions: 1, replicationFactor: 3 });

    // When a producer writes batches with acks=all (durable ack is on for this topic), for at most
    // 60 s until the leader's sidecar has sent references (the first fetches of a new topic go
    // inline as unknown_topic until the sidecar has looked its name up)
    const producer = kafkaClient(cluster!.bootstrap()).producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const started = Date.now();
    for (let i = 0; i < 300 && Date.now() - started < 60_000; i++) {
      await producer.send({
        topic: TOPIC,
        acks: -1,
        messages: [{ key: `k${i}`, value: Buffer.alloc(4_000, 't') }],
      });
      if (i % 10 === 9 && (await referencesSent())) break;
    }
    await producer.disconnect();

    // Then Jaeger has a durable-ack span, the child of its produce span, linking to an upload
    const produceTrace = await eventually(async () => {
      for (const service of services) {
        const traces = await jaeger!.traces(service, {
          operation: 'walproxy.produce.durable_ack',
          limit: 20,
        });
        const linked = traces.find((t) =>
          t.spans.some(
            (s) =>
              s.operationName === 'walproxy.produce.durable_ack' &&
              s.references.some((r) => r.refType === 'FOLLOWS_FROM'),
          ),
        );
        if (linked) return linked;
      }
      return undefined;
    });
    expect(
      produceTrace,
      `no linked durable-ack span; Jaeger has services ${await jaeger!.services()}`,
    ).toBeDefined();
    const produce = produceTrace!.spans.find((s) => s.operationName === 'walproxy.produce')!;
    const ack = produceTrace!.spans.find((s) => s.operationName === 'walproxy.produce.durable_ack')!;
    expect(produce).toBeDefined();
    expect(ack.references).toContainEqual(
      expect.objectContaining({ refType: 'CHILD_OF', spanID: produce.spanID }),
    );
    expect(tag(ack, 'walproxy.produce.outcome')).toBe('stored');
    const link = ack.references.find((r) => r.refType === 'FOLLOWS_FROM')!;
    const leader = produceTrace!.processes[produce.processID]!.serviceName;

    // And the linked upload is in its own trace, the child of its object's seal, both carrying the
    // object key, by which an operator finds them again
    const uploadTrace = await eventually(() => jaeger!.trace(link.traceID));
    const upload = uploadTrace?.spans.find((s) => s.spanID === link.spanID);
    expect(upload?.operationName).toBe('walproxy.wal.upload');
    expect(tag(upload!, 'walproxy.wal.upload.outcome')).toBe('stored');
    const key = tag(upload!, 'walproxy.wal.object.key') as string;
    const seal = uploadTrace!.spans.find((s) => s.operationName === 'walproxy.wal.seal')!;
    expect(upload!.references).toContainEqual(
      expect.objectContaining({ refType: 'CHILD_OF', spanID: seal.spanID }),
    );
    expect(tag(seal, 'walproxy.wal.object.key')).toBe(key);
    const byKey = await jaeger!.traces(leader, { tags: { 'walproxy.wal.object.key': key } });
    expect(byKey.map((t) => t.traceID)).toContain(uploadTrace!.traceID);

    // And one produce's story is one trace: among the objects its durable acks link to (the newest
    // first; the very first batches of a new topic go inline as unknown_topic, so their objects
    // have no strip), one whose trace holds its seal and upload, the leader's strip of a follower
    // fetch that referenced it and each follower's fill of it, children of the upload (the fill
    // through the trace context the Fetch response carried across), or, for a strip or fill over
    // several objects, root spans linking to the upload
    const followers = services.filter((s) => s !== leader);
    const story = await eventually(async () => {
      const acks = await jaeger!.traces(leader, { operation: 'walproxy.produce.durable_ack', limit: 20 });
      for (const trace of acks) {
        for (const span of trace.spans.filter((s) => s.operationName === 'walproxy.produce.durable_ack')) {
          for (const ref of span.references.filter((r) => r.refType === 'FOLLOWS_FROM')) {
            const found = await storyOf(ref.traceID, ref.spanID, leader, followers);
            if (found) return { produceTrace: trace, ack: span, ...found };
          }
        }
      }
      return undefined;
    }, 45_000);
    expect(
      story,
      `no upload with a strip on ${leader} and fills on ${followers.join(', ')} joined to it`,
    ).toBeDefined();
    const { upload: joinedUpload, uploadTrace: objectTrace, strip, fills } = story!;
    const joinedKey = tag(joinedUpload, 'walproxy.wal.object.key') as string;
    expect(story!.produceTrace.spans.map((s) => s.operationName)).toContain('walproxy.produce');
    expect(objectTrace.spans.find((s) => s.operationName === 'walproxy.wal.seal')).toBeDefined();
    expect(Number(tag(strip.span, 'walproxy.fetch.references'))).toBeGreaterThan(0);
    for (const fill of fills) expect(Number(tag(fill.span, 'walproxy.fetch.references'))).toBeGreaterThan(0);
    // And a fill of that one object is found by its key on the follower's service, as the upload is
    for (const [i, fill] of fills.entries()) {
      if (fill.how !== 'child') continue;
      expect(tag(fill.span, 'walproxy.wal.object.key')).toBe(joinedKey);
      const onFollower = await jaeger!.traces(followers[i]!, {
        tags: { 'walproxy.wal.object.key': joinedKey },
      });
      expect(onFollower.map((t) => t.traceID)).toContain(objectTrace.traceID);
    }
    console.log(
      `one story: produce ${story!.produceTrace.traceID} on ${leader} → durable ack → (link) object ${joinedKey}: ` +
        `trace ${objectTrace.traceID} = seal → upload → strip on ${leader} (${strip.how}), ` +
        fills.map((f, i) => `fill on ${followers[i]} (${f.how})`).join(', '),
    );
  });
});

/** A strip or fill span joined to an upload: its child (in the upload's trace), or a root linking to it. */
interface Joined {
  span: JaegerSpan;
  how: 'child' | 'link';
}

/**
 * The upload span `spanId` of trace `traceId`, with the leader's strip and every follower's fill
 * joined to it, or undefined while one is missing.
 */
async function storyOf(traceId: string, spanId: string, leader: string, followers: string[]) {
  const uploadTrace = await jaeger!.trace(traceId);
  const upload = uploadTrace?.spans.find((s) => s.spanID === spanId);
  if (!uploadTrace || upload?.operationName !== 'walproxy.wal.upload') return undefined;
  const joined = async (service: string, operation: string): Promise<Joined | undefined> => {
    const child = uploadTrace.spans.find(
      (s) =>
        s.operationName === operation &&
        uploadTrace.processes[s.processID]?.serviceName === service &&
        s.references.some((r) => r.refType === 'CHILD_OF' && r.spanID === spanId),
    );
    if (child) return { span: child, how: 'child' };
    const traces = await jaeger!.traces(service, { operation, limit: 200 });
    const linking = traces
      .flatMap((t) => t.spans)
      .find(
        (s) =>
          s.operationName === operation &&
          s.references.some((r) => r.refType === 'FOLLOWS_FROM' && r.spanID === spanId),
      );
    return linking ? { span: linking, how: 'link' } : undefined;
  };
  const strip = await joined(leader, 'walproxy.fetch.strip');
  if (!strip) return undefined;
  const fills: Joined[] = [];
  for (const follower of followers) {
    const fill = await joined(follower, 'walproxy.fetch.fill');
    if (!fill) return undefined;
    fills.push(fill);
  }
  return { upload, uploadTrace, strip, fills };
}
