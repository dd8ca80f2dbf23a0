import net from 'node:net';
import {
  ApiKey,
  decodeFetchRequest,
  decodeMetadataResponse,
  decodeRequestHeader,
  encodeFetchRequest,
  encodeFetchResponse,
  encodeMetadataRequest,
  encodeMetadataResponse,
  type RequestKey,
} from '@walproxy/shared';
import { afterEach, describe, expect, it } from 'vitest';
import type { ZoneConfig } from '../../src/config/zone-flags.js';
import { createLogger } from '../../src/log.js';
import { memoryBounds } from '../../src/memory-budget.js';
import { FrameDecoder } from '../../src/net/frame-decoder.js';
import { ZoneRouting } from '../../src/zone/zone-routing.js';
import { requestFrame, responseFrame } from './frames.js';

const log = createLogger('silent');
const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

/** A broker stand-in: answers Metadata v12 and Fetch v17, and records every request frame. */
async function startBroker(): Promise<{ port: number; requests: Buffer[] }> {
  const requests: Buffer[] = [];
  const server = net.createServer((socket) => {
    const decoder = new FrameDecoder(1 << 20);
    socket.on('error', () => undefined);
    socket.on('data', (chunk) => {
      for (const frame of decoder.push(chunk)) {
        requests.push(Buffer.from(frame));
        const header = decodeRequestHeader(frame.subarray(4));
        const key: RequestKey = header;
        const body =
          header.apiKey === ApiKey.Metadata
            ? encodeMetadataResponse(
                {
                  throttleTimeMs: 0,
                  brokers: [
                    { nodeId: 1, host: 'broker-1.advertised', port: 9192, rack: 'zone-a' },
                    { nodeId: 2, host: 'broker-2.advertised', port: 9192, rack: 'zone-b' },
                  ],
                  clusterId: 'c',
                  controllerId: 1,
                  topics: [],
                },
                12,
              )
            : encodeFetchResponse({ throttleTimeMs: 0, errorCode: 0, sessionId: 0, responses: [] }, 17);
        socket.write(responseFrame(key, body));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.push(() => new Promise((resolve) => server.close(() => resolve())));
  return { port: (server.address() as net.AddressInfo).port, requests };
}

function zoneConfig(
  zone: string,
  base: number,
  ids: number[],
  ingress: Map<number, { host: string; port: number }>,
): ZoneConfig {
  return {
    zone,
    egressListenHost: '127.0.0.1',
    egressListenBase: base,
    egressBrokerIds: ids,
    ingressAddresses: ingress,
    ingressListen: { host: '127.0.0.1', port: 0 },
    sidecarHosts: new Map([
      ['zone-a', ['127.0.0.1']],
      ['zone-b', ['localhost']],
    ]),
    rackFromFetch: true,
    allowUnauthenticatedPeers: true,
  };
}

async function start(routing: ZoneRouting): Promise<void> {
  for (const listener of routing.listeners) await listener.start();
  cleanup.push(async () => {
    for (const listener of routing.listeners) await listener.drain(0);
  });
}

/** Sends `frames` on one connection to `port` and returns the response frames. */
async function exchange(port: number, frames: Buffer[]): Promise<Buffer[]> {
  const socket = net.connect({ host: '127.0.0.1', port });
  const decoder = new FrameDecoder(1 << 20);
  const out: Buffer[] = [];
  return new Promise((resolve, reject) => {
    socket.on('error', reject);
    socket.on('data', (chunk) => {
      out.push(...decoder.push(chunk).map((f) => Buffer.from(f)));
      if (out.length === frames.length) {
        socket.destroy();
        resolve(out);
      }
    });
    socket.on('connect', () => socket.write(Buffer.concat(frames)));
  });
}

describe('zone routing listeners', () => {
  it("carry a zone-aware client to another zone's broker through both sidecars, end to end", async () => {
    // Given broker 1's sidecar in zone-a and broker 2's in zone-b, each in front of its broker
    // Egress ports are base + broker id, so they are chosen, not the kernel's: below Linux's
    // ephemeral range (32768 and up), where a port of an outgoing connection or of another
    // process's listen(0) cannot be taken from under this test (CI once lost 39404 that way)
    const base = 20_000 + Math.floor(Math.random() * 10_000);
    const broker1 = await startBroker();
    const broker2 = await startBroker();
    const common = {
      maxFrameBytes: 1 << 20,
      maxBufferedBytes: 1 << 20,
      log,
      peerFilters: [],
      memory: memoryBounds(512 * 1024 * 1024, 'flag'),
      ingressFilters: [],
    };
    const sidecar2 = new ZoneRouting({
      ...common,
      brokerId: 2,
      zone: zoneConfig('zone-b', base + 100, [2], new Map()),
      clientUpstream: { host: '127.0.0.1', port: broker2.port },
      brokerFilters: [],
    });
    await start(sidecar2);
    const ingress2 = sidecar2.listeners.find((l) => l.options.name === 'zone-ingress')!.address;
    const sidecar1 = new ZoneRouting({
      ...common,
      brokerId: 1,
      zone: {
        ...zoneConfig('zone-a', base, [1, 2], new Map([[2, ingress2]])),
        bootstrapListen: { host: '127.0.0.1', port: 0 },
      },
      clientUpstream: { host: '127.0.0.1', port: broker1.port },
      brokerFilters: [],
    });
    await start(sidecar1);
    expect(sidecar1.listeners.map((l) => l.options.name)).toEqual([
      'zone-egress-1',
      'zone-egress-2',
      'zone-bootstrap',
      'zone-ingress',
    ]);

    // When a client of zone-a asks node 2, at the address zone-a's clients are given for it
    const metadata = { apiKey: ApiKey.Metadata, apiVersion: 12, correlationId: 7 };
    const metadataRequest = requestFrame(metadata, 'app', encodeMetadataRequest({ topics: null }, 12));
    const fetch = { apiKey: ApiKey.Fetch, apiVersion: 17, correlationId: 8 };
    const fetchRequest = requestFrame(
      fetch,
      'app',
      encodeFetchRequest(
        {
          maxWaitMs: 1,
          minBytes: 1,
          maxBytes: 1,
          isolationLevel: 0,
          sessionId: 0,
          sessionEpoch: -1,
          topics: [],
          forgottenTopicsData: [],
          rackId: '',
        },
        17,
      ),
    );
    const [metadataResponse] = await exchange(base + 2, [metadataRequest, fetchRequest]);

    // Then broker 2 got the request bytes the client sent, and the consumer fetch named zone-a
    expect(broker2.requests[0]).toEqual(metadataRequest);
    const fetched = broker2.requests[1]!;
    expect(
      decodeFetchRequest(fetched.subarray(4 + decodeRequestHeader(fetched.subarray(4)).headerLength), 17)
        .rackId,
    ).toBe('zone-a');
    expect(broker1.requests).toEqual([]);
    // And every node's address is the zone egress on zone-a's sidecar
    const brokers = decodeMetadataResponse(metadataResponse!.subarray(9), 12).brokers;
    expect(brokers.map((b) => `${b.nodeId}@${b.host}:${b.port}`)).toEqual([
      `1@127.0.0.1:${base + 1}`,
      `2@127.0.0.1:${base + 2}`,
    ]);

    // And a client naming zone-b in its client.id, bootstrapping in zone-a, is given zone-b's sidecars
    const bootstrap = sidecar1.listeners.find((l) => l.options.name === 'zone-bootstrap')!.address.port;
    const [hinted] = await exchange(bootstrap, [
      requestFrame(metadata, 'app,walproxy_az=zone-b', encodeMetadataRequest({ topics: null }, 12)),
    ]);
    expect(broker1.requests).toHaveLength(1);
    expect(decodeMetadataResponse(hinted!.subarray(9), 12).brokers.map((b) => `${b.host}:${b.port}`)).toEqual(
      [`localhost:${base + 1}`, `localhost:${base + 2}`],
    );
  });
});
