import {
  ApiKey,
  decodeDescribeClusterResponse,
  decodeFetchRequest,
  decodeFetchResponse,
  decodeFindCoordinatorResponse,
  decodeMetadataResponse,
  decodeProduceResponse,
  decodeRequestHeader,
  encodeDescribeClusterResponse,
  encodeFetchRequest,
  encodeFetchResponse,
  encodeFindCoordinatorResponse,
  encodeMetadataRequest,
  encodeMetadataResponse,
  encodeProduceRequest,
  encodeProduceResponse,
  type FetchRequest,
  type MetadataResponse,
} from '@walproxy/shared';
import { describe, expect, it } from 'vitest';
import type { ZoneConfig } from '../../src/config/zone-flags.js';
import { createLogger } from '../../src/log.js';
import type { FilterConnection, RequestDecision, RequestInfo } from '../../src/net/frame-filter.js';
import { RackMemory } from '../../src/zone/client-zone.js';
import { ZoneDirectory } from '../../src/zone/zone-directory.js';
import { ZoneRouteFilter } from '../../src/zone/zone-route-filter.js';
import { requestFrame, responseBody, responseFrame } from './frames.js';

const log = createLogger('silent');
const ZONES: ZoneConfig = {
  zone: 'zone-a',
  egressListenHost: '0.0.0.0',
  egressListenBase: 29000,
  egressBrokerIds: [1, 2, 3],
  ingressAddresses: new Map(),
  sidecarHosts: new Map([
    ['zone-a', ['sidecar-a']],
    ['zone-b', ['sidecar-b1', 'sidecar-b2']],
  ]),
  rackFromFetch: true,
};

function filterFor(listenerZone?: string, rackMemory = new RackMemory()): ZoneRouteFilter {
  return new ZoneRouteFilter({
    directory: new ZoneDirectory(ZONES),
    rackMemory,
    rackFromFetch: true,
    log,
    ...(listenerZone ? { listenerZone } : {}),
  });
}

const connection = (remoteAddress = '198.18.6.100'): FilterConnection => ({ log, remoteAddress });

let correlation = 0;
function info(apiKey: number, apiVersion: number): RequestInfo {
  return { apiKey, apiVersion, correlationId: ++correlation };
}

function forwarded(decision: RequestDecision): Buffer {
  if (decision.action !== 'forward') throw new Error('expected the request to be forwarded');
  return decision.frame;
}

const metadataResponse = (): MetadataResponse => ({
  throttleTimeMs: 0,
  brokers: [
    { nodeId: 1, host: '198.18.1.11', port: 9231, rack: 'zone-a' },
    { nodeId: 2, host: '198.18.2.12', port: 9232, rack: 'zone-b' },
    { nodeId: 3, host: '198.18.3.13', port: 9233, rack: 'zone-c' },
    { nodeId: 4, host: '198.18.3.14', port: 9234, rack: 'zone-c' },
  ],
  clusterId: 'cluster',
  controllerId: 1,
  topics: [],
  errorCode: 0,
});

/** Sends a Metadata v12 request with `clientId` and its response through `filter`. */
function metadataThrough(
  filter: ZoneRouteFilter,
  clientId: string | null,
  conn = connection(),
): { out: Buffer; original: Buffer } {
  const i = info(ApiKey.Metadata, 12);
  forwarded(
    filter.onRequest(i, requestFrame(i, clientId, encodeMetadataRequest({ topics: null }, 12)), conn),
  );
  const original = responseFrame(i, encodeMetadataResponse(metadataResponse(), 12));
  return { out: filter.onResponse(i, original), original };
}

const hosts = (out: Buffer, version = 12) =>
  decodeMetadataResponse(out.subarray(9), version).brokers.map(
    (b) => `${b.nodeId}@${b.host}:${b.port}/${b.rack}`,
  );

describe('zone routing on the client ingress', () => {
  it('leaves a client without a zone exactly as it was', () => {
    // Given a client whose client.id names no zone and that never sent a client.rack
    const filter = filterFor();
    // When its Metadata answer comes back
    const { out, original } = metadataThrough(filter, 'producer-1');
    // Then it is the broker's frame itself
    expect(out).toBe(original);
  });

  it("gives a client whose client.id names a zone that zone's egress for every node, keeping node ids and racks", () => {
    const filter = filterFor();
    const { out } = metadataThrough(filter, 'orders,walproxy_az=zone-b');
    // Node 4 has no zone egress: it keeps the broker's address (the stock path).
    expect(hosts(out)).toEqual([
      '1@sidecar-b2:29001/zone-a',
      '2@sidecar-b1:29002/zone-b',
      '3@sidecar-b2:29003/zone-c',
      '4@198.18.3.14:9234/zone-c',
    ]);
    expect(filter.stats).toMatchObject({ clientsByHint: 1, metadataRewritten: 1 });
  });

  it("learns each node's zone from the racks Metadata names (zone-local produce skips same-zone leaders)", () => {
    const directory = new ZoneDirectory(ZONES);
    const filter = new ZoneRouteFilter({ directory, rackMemory: new RackMemory(), rackFromFetch: true, log });
    metadataThrough(filter, 'orders,walproxy_az=zone-b');
    expect([1, 2, 3, 4].map((id) => directory.zoneOfNode(id))).toEqual([
      'zone-a',
      'zone-b',
      'zone-c',
      undefined,
    ]);
  });

  it('ignores a hint naming a zone it has no sidecar for', () => {
    const { out, original } = metadataThrough(filterFor(), 'walproxy_az=zone-x');
    expect(out).toBe(original);
  });

  it('routes a client by the client.rack its Fetch named, on later requests of any connection', () => {
    // Given a consumer that fetched with client.rack zone-b
    const memory = new RackMemory();
    const filter = filterFor(undefined, memory);
    const fetch = info(ApiKey.Fetch, 17);
    const request = requestFrame(fetch, 'consumer-7', encodeFetchRequest(consumerFetch('zone-b'), 17));
    expect(forwarded(filter.onRequest(fetch, request, connection('10.1.1.1')))).toBe(request);
    // When the same client (address and client.id) asks for Metadata on another connection
    const { out } = metadataThrough(filter, 'consumer-7', connection('10.1.1.1'));
    // Then it is sent to zone-b's sidecars; another client is not
    expect(hosts(out)[0]).toBe('1@sidecar-b2:29001/zone-a');
    const other = metadataThrough(filter, 'consumer-7', connection('10.1.1.2'));
    expect(other.out).toBe(other.original);
    expect(filter.stats.clientRacksLearned).toBe(1);
  });

  it('learns nothing from a client.rack that names no known zone', () => {
    const filter = filterFor();
    const fetch = info(ApiKey.Fetch, 17);
    filter.onRequest(
      fetch,
      requestFrame(fetch, 'c', encodeFetchRequest(consumerFetch('rack-9'), 17)),
      connection(),
    );
    const { out, original } = metadataThrough(filter, 'c');
    expect(out).toBe(original);
  });
});

describe('zone routing on a zone egress', () => {
  it("routes every client to the listener's zone unless its client.id names another", () => {
    const filter = filterFor('zone-a');
    expect(hosts(metadataThrough(filter, 'rdkafka').out).slice(0, 3)).toEqual([
      '1@sidecar-a:29001/zone-a',
      '2@sidecar-a:29002/zone-b',
      '3@sidecar-a:29003/zone-c',
    ]);
    expect(hosts(metadataThrough(filter, 'walproxy_az=zone-b').out)[1]).toBe('2@sidecar-b1:29002/zone-b');
    expect(hosts(metadataThrough(filter, 'walproxy_az=zone-x').out)[1]).toBe('2@sidecar-a:29002/zone-b');
  });

  it('rewrites Metadata v0 (no racks) and v13 alike', () => {
    const filter = filterFor('zone-a');
    for (const v of [0, 13]) {
      const i = info(ApiKey.Metadata, v);
      filter.onRequest(i, requestFrame(i, 'c', encodeMetadataRequest({ topics: [] }, v)), connection());
      const m = metadataResponse();
      if (v === 0) for (const b of m.brokers) b.rack = undefined;
      const out = filter.onResponse(i, responseFrame(i, encodeMetadataResponse(m, v)));
      const decoded = decodeMetadataResponse(responseBody(i, out), v);
      expect(decoded.brokers[2]).toMatchObject({ nodeId: 3, host: 'sidecar-a', port: 29003 });
      // Everything else is what the broker said.
      for (const [n, b] of m.brokers.slice(0, 3).entries())
        Object.assign(b, { host: 'sidecar-a', port: 29001 + n });
      expect(decoded).toEqual(decodeMetadataResponse(encodeMetadataResponse(m, v), v));
    }
  });

  it('rewrites the coordinator of FindCoordinator v3 and v4+, leaving error answers alone', () => {
    const filter = filterFor('zone-a');
    const v3 = info(ApiKey.FindCoordinator, 3);
    filter.onRequest(v3, requestFrame(v3, 'c', Buffer.from('0467727000 00', 'hex')), connection());
    const out3 = filter.onResponse(
      v3,
      responseFrame(
        v3,
        encodeFindCoordinatorResponse(
          { throttleTimeMs: 0, errorCode: 0, errorMessage: null, nodeId: 2, host: '198.18.2.12', port: 9232 },
          3,
        ),
      ),
    );
    expect(decodeFindCoordinatorResponse(responseBody(v3, out3), 3)).toMatchObject({
      nodeId: 2,
      host: 'sidecar-a',
      port: 29002,
    });
    const v6 = info(ApiKey.FindCoordinator, 6);
    filter.onRequest(v6, requestFrame(v6, 'c', Buffer.from('0103046772700374780000', 'hex')), connection());
    const out6 = filter.onResponse(
      v6,
      responseFrame(
        v6,
        encodeFindCoordinatorResponse(
          {
            throttleTimeMs: 0,
            coordinators: [
              { key: 'grp', nodeId: 3, host: '198.18.3.13', port: 9233, errorCode: 0, errorMessage: null },
              { key: 'tx', nodeId: -1, host: '', port: -1, errorCode: 15, errorMessage: null },
            ],
          },
          6,
        ),
      ),
    );
    expect(decodeFindCoordinatorResponse(responseBody(v6, out6), 6).coordinators).toMatchObject([
      { key: 'grp', nodeId: 3, host: 'sidecar-a', port: 29003 },
      { key: 'tx', nodeId: -1, host: '', port: -1 },
    ]);
  });

  it('rewrites DescribeCluster brokers, never a list of controllers', () => {
    const filter = filterFor('zone-a');
    for (const endpointType of [1, 2]) {
      const i = info(ApiKey.DescribeCluster, 2);
      filter.onRequest(i, requestFrame(i, 'admin', Buffer.from('00010000', 'hex')), connection());
      const original = responseFrame(
        i,
        encodeDescribeClusterResponse(
          {
            throttleTimeMs: 0,
            errorCode: 0,
            errorMessage: null,
            endpointType,
            clusterId: 'cluster',
            controllerId: 1,
            brokers: [{ brokerId: 1, host: '198.18.1.11', port: 9231, rack: 'zone-a', isFenced: false }],
          },
          2,
        ),
      );
      const out = filter.onResponse(i, original);
      if (endpointType === 2) expect(out).toBe(original);
      else
        expect(decodeDescribeClusterResponse(responseBody(i, out), 2).brokers[0]).toMatchObject({
          host: 'sidecar-a',
          port: 29001,
          rack: 'zone-a',
        });
    }
  });

  it('rewrites the KIP-951 NodeEndpoints of a Produce answer, and waits for no answer to acks=0', () => {
    const filter = filterFor('zone-a');
    const i = info(ApiKey.Produce, 12);
    const request = (acks: number) =>
      requestFrame(
        i,
        'producer',
        encodeProduceRequest({ transactionalId: null, acks, timeoutMs: 1000, topicData: [] }, 12),
      );
    expect(filter.onRequest(i, request(0), connection())).toMatchObject({
      action: 'forward',
      expectResponse: false,
    });
    expect(filter.onRequest(i, request(-1), connection())).toMatchObject({
      action: 'forward',
      expectResponse: true,
    });
    const out = filter.onResponse(
      i,
      responseFrame(
        i,
        encodeProduceResponse(
          {
            responses: [
              {
                name: 't',
                partitionResponses: [
                  {
                    index: 0,
                    errorCode: 6,
                    baseOffset: -1n,
                    logAppendTimeMs: -1n,
                    logStartOffset: -1n,
                    recordErrors: [],
                    errorMessage: null,
                    currentLeader: { leaderId: 2, leaderEpoch: 5 },
                  },
                ],
              },
            ],
            throttleTimeMs: 0,
            nodeEndpoints: [{ nodeId: 2, host: '198.18.2.12', port: 9232, rack: 'zone-b' }],
          },
          12,
        ),
      ),
    );
    const decoded = decodeProduceResponse(responseBody(i, out), 12);
    expect(decoded.nodeEndpoints).toEqual([{ nodeId: 2, host: 'sidecar-a', port: 29002, rack: 'zone-b' }]);
    expect(decoded.responses[0]!.partitionResponses[0]!.currentLeader).toEqual({
      leaderId: 2,
      leaderEpoch: 5,
    });
  });

  it('rewrites the NodeEndpoints of a Fetch answer, leaving its records byte for byte', () => {
    const filter = filterFor('zone-a');
    const i = info(ApiKey.Fetch, 17);
    filter.onRequest(
      i,
      requestFrame(i, 'consumer', encodeFetchRequest(consumerFetch('zone-a'), 17)),
      connection(),
    );
    const records = Buffer.from('0123456789abcdef', 'hex');
    const out = filter.onResponse(
      i,
      responseFrame(
        i,
        encodeFetchResponse(
          {
            throttleTimeMs: 0,
            errorCode: 0,
            sessionId: 0,
            responses: [
              {
                topicId: 'ab'.repeat(16),
                partitions: [
                  {
                    partitionIndex: 0,
                    errorCode: 0,
                    highWatermark: 10n,
                    lastStableOffset: 10n,
                    logStartOffset: 0n,
                    abortedTransactions: null,
                    preferredReadReplica: -1,
                    records,
                  },
                ],
              },
            ],
            nodeEndpoints: [{ nodeId: 3, host: '198.18.3.13', port: 9233, rack: 'zone-c' }],
          },
          17,
        ),
      ),
    );
    const decoded = decodeFetchResponse(responseBody(i, out), 17);
    expect(decoded.nodeEndpoints![0]).toMatchObject({ host: 'sidecar-a', port: 29003 });
    expect(decoded.responses[0]!.partitions[0]!.records).toEqual(records);
  });

  it("gives a rack-less consumer Fetch the client's zone, and leaves a set client.rack and replica fetches alone", () => {
    const filter = filterFor('zone-a');
    for (const v of [11, 17]) {
      const i = info(ApiKey.Fetch, v);
      const request = requestFrame(i, 'consumer', encodeFetchRequest(consumerFetch('', v), v));
      const out = forwarded(filter.onRequest(i, request, connection()));
      const header = decodeRequestHeader(out.subarray(4));
      expect(header.clientId).toBe('consumer');
      const decoded = decodeFetchRequest(out.subarray(4 + header.headerLength), v);
      expect(decoded.rackId).toBe('zone-a');
      expect({ ...decoded, rackId: '' }).toEqual(
        decodeFetchRequest(encodeFetchRequest(consumerFetch('', v), v), v),
      );
    }
    const hinted = info(ApiKey.Fetch, 17);
    const hintedOut = forwarded(
      filter.onRequest(
        hinted,
        requestFrame(hinted, 'walproxy_az=zone-b', encodeFetchRequest(consumerFetch(''), 17)),
        connection(),
      ),
    );
    expect(
      decodeFetchRequest(hintedOut.subarray(4 + decodeRequestHeader(hintedOut.subarray(4)).headerLength), 17)
        .rackId,
    ).toBe('zone-b');

    const own = info(ApiKey.Fetch, 17);
    const ownRack = requestFrame(own, 'consumer', encodeFetchRequest(consumerFetch('zone-c'), 17));
    expect(forwarded(filter.onRequest(own, ownRack, connection()))).toBe(ownRack);
    const replica = info(ApiKey.Fetch, 17);
    const replicaFetch = requestFrame(
      replica,
      'broker-2-fetcher-0',
      encodeFetchRequest({ ...consumerFetch(''), replicaState: { replicaId: 2, replicaEpoch: 7n } }, 17),
    );
    expect(forwarded(filter.onRequest(replica, replicaFetch, connection()))).toBe(replicaFetch);
    const old = info(ApiKey.Fetch, 10);
    const v10 = requestFrame(old, 'consumer', encodeFetchRequest(consumerFetch(undefined, 10), 10));
    expect(forwarded(filter.onRequest(old, v10, connection()))).toBe(v10);
    expect(filter.stats.fetchRackIdsSet).toBe(3);
  });

  it('forwards a request whose client.id is not UTF-8 unchanged, as the broker reads it, and leaves its answer alone', () => {
    // Given a Metadata request from a client of this listener's zone whose client.id bytes are
    // not valid UTF-8 (Kafka decodes them with replacement characters and answers)
    const filter = filterFor('zone-a');
    const i = info(ApiKey.Metadata, 12);
    const request = requestFrame(i, 'ab', encodeMetadataRequest({ topics: null }, 12));
    // size(4) api key(2) version(2) correlation id(4) client.id length(2), then its two bytes
    request.writeUInt8(0xff, 14);
    request.writeUInt8(0xfe, 15);
    // When it passes the filter, Then it goes to the broker byte for byte, counted
    expect(forwarded(filter.onRequest(i, request, connection()))).toBe(request);
    expect(filter.stats.requestsNotDecoded).toBe(1);
    // And the broker's answer reaches the client unrewritten
    const original = responseFrame(i, encodeMetadataResponse(metadataResponse(), 12));
    expect(filter.onResponse(i, original)).toBe(original);
  });

  it('forwards a consumer Fetch whose body the codec refuses unchanged, and counts it', () => {
    const filter = filterFor('zone-a');
    const i = info(ApiKey.Fetch, 17);
    const request = requestFrame(i, 'c', Buffer.from('00000000ff', 'hex'));
    expect(forwarded(filter.onRequest(i, request, connection()))).toBe(request);
    expect(filter.stats.requestsNotDecoded).toBe(1);
  });

  it('forwards a response it cannot decode unrewritten, and counts it', () => {
    const filter = filterFor('zone-a');
    const i = info(ApiKey.Metadata, 12);
    filter.onRequest(i, requestFrame(i, 'c', encodeMetadataRequest({ topics: null }, 12)), connection());
    const garbage = responseFrame(i, Buffer.from('00000000ff', 'hex'));
    expect(filter.onResponse(i, garbage)).toBe(garbage);
    expect(filter.stats.undecodable).toBe(1);
  });
});

function consumerFetch(rackId: string | undefined, v = 17): FetchRequest {
  return {
    replicaId: v <= 14 ? -1 : undefined,
    maxWaitMs: 500,
    minBytes: 1,
    maxBytes: 1 << 20,
    isolationLevel: 0,
    sessionId: 0,
    sessionEpoch: -1,
    topics: [
      {
        topic: v < 13 ? 't' : undefined,
        topicId: v >= 13 ? 'ab'.repeat(16) : undefined,
        partitions: [
          {
            partition: 0,
            currentLeaderEpoch: 1,
            fetchOffset: 0n,
            logStartOffset: -1n,
            partitionMaxBytes: 1 << 20,
          },
        ],
      },
    ],
    forgottenTopicsData: [],
    rackId,
  };
}
