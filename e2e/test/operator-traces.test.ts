// A WAL produce's spans in a real tracing backend: Jaeger (`make jaeger`) and a cluster of its own
// on the three-zone network, so that, as in Kubernetes, each broker pod has its own localhost and
// a follower's fill runs in the follower's sidecar (on one shared loopback the follower connects to
// the leader's egress listener, and the fill would be traced by the leader). The sidecars export
// OTLP/HTTP to Jaeger, and its query API (what the Jaeger UI reads) lists the spans.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTopic, kafkaClient } from '../src/clients/kafkajs.js';
import { BROKER_IDS, KafkaCluster, RACKS } from '../src/cluster/kafka-cluster.js';
import { walSidecarArgs, walSidecarEnv } from '../src/cluster/wal-settings.js';
import { type Zone, ZoneNetwork } from '../src/net/zone-network.js';
import { type MotoServer, startMoto } from '../src/s3/moto.js';
import { Jaeger, type JaegerSpan } from '../src/tracing/jaeger.js';

const TOPIC = 'wal-traces';
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

/** The first span named `operation` with references (`walproxy.fetch.references` > 0) on `service`. */
async function spanWithReferences(service: string, operation: string): Promise<JaegerSpan | undefined> {
  const traces = await jaeger!.traces(service, { operation, limit: 5_000 });
  return traces
    .flatMap((t) => t.spans)
    .find((s) => s.operationName === operation && Number(tag(s, 'walproxy.fetch.references')) > 0);
}

/** Whether some sidecar has sent references (its /counters). */
async function referencesSent(): Promise<boolean> {
  const counters = await Promise.all(BROKER_IDS.map((id) => cluster!.sidecarCounters(id)));
  return counters.some((c) => Number(c.wal?.fetchStrip?.referencesSent ?? 0) > 0);
}

describe('traces of a WAL produce in Jaeger', () => {
  it('shows the produce, its durable ack linked to the upload and the seal, the leader strip and the follower fill', async () => {
    // Given a WAL topic, one partition, on three brokers in three zones
    await createTopic(cluster!.bootstrap(), TOPIC, { partitions: 1, replicationFactor: 3 });

    // When a producer writes batches with acks=all (durable ack is on for WAL topics), for at most
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

    // And the leader's sidecar traced a strip that sent references, and each follower's sidecar a
    // fill that read them from the store: root spans of their own, linked to nothing (their events
    // carry no object key yet, so nothing ties them to the upload: docs/observability.md)
    const strip = await eventually(() => spanWithReferences(leader, 'walproxy.fetch.strip'));
    expect(strip, `a strip with references on ${leader}`).toBeDefined();
    const followers = services.filter((s) => s !== leader);
    const fills = await Promise.all(
      followers.map((service) => eventually(() => spanWithReferences(service, 'walproxy.fetch.fill'))),
    );
    for (const [i, fill] of fills.entries())
      expect(fill, `a fill with references on ${followers[i]}`).toBeDefined();
    expect(strip!.references).toEqual([]);
    for (const fill of fills) expect(fill!.references).toEqual([]);
    console.log(
      `traces: on ${leader} produce ${produce.traceID} → durable ack → (link) upload ${link.traceID} ← seal, object ${key}; ` +
        `strip ${strip!.traceID} on ${leader}, fills ${fills.map((f, i) => `${f!.traceID} on ${followers[i]}`).join(', ')}: separate roots`,
    );
  });
});
