import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApiKey, decodeApiVersionsResponse, encodeApiVersionsResponse } from '@walproxy/shared';
import { afterEach, describe, expect, it } from 'vitest';
import { parseSidecarConfig, type RawSidecarOptions } from '../src/config/sidecar-config.js';
import { ApiVersionsFilter } from '../src/filters/api-versions.js';
import { FetchEpochWaitFilter } from '../src/filters/fetch-epoch-wait.js';
import { SaslHandshakeFilter } from '../src/filters/sasl-handshake.js';
import { buildListeners } from '../src/listeners.js';
import { createLogger } from '../src/log.js';
import { memoryBounds } from '../src/memory-budget.js';
import { FilterChain } from '../src/net/filter-chain.js';

// buildListeners from a parsed configuration, without opening a socket: which listeners a stop
// drains in which group, and which filters each carries. The sockets' side is
// sidecar-lifecycle.test.ts's.

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function configOf(extra: RawSidecarOptions) {
  const parsed = parseSidecarConfig({
    'broker-id': '1',
    'client-listen': '127.0.0.1:19092',
    'client-upstream': '127.0.0.1:29092',
    'replication-listen': '127.0.0.1:19093',
    'replication-upstream': '127.0.0.1:29093',
    'egress-listen-base': '19200',
    'peer-address': '2=127.0.0.1:39093,3=127.0.0.1:49093',
    'controller-listen-base': '19300',
    'controller-address': '100=127.0.0.1:29300',
    'admin-listen': 'off',
    ...extra,
  });
  if (!('config' in parsed)) throw new Error(parsed.errors.join('\n'));
  return parsed.config;
}

function build(extra: RawSidecarOptions = {}) {
  const saslHandshake = new SaslHandshakeFilter();
  const built = buildListeners(configOf(extra), {
    log: createLogger('silent'),
    memory: memoryBounds(512 * 1024 * 1024, 'flag'),
    saslHandshake,
  });
  // Stopped as Sidecar.stop() would, should a part have started a timer.
  cleanups.push(() => built.wal?.peerReaders.close());
  return { built, saslHandshake };
}

const names = (listeners: { options: { name: string } }[]) => listeners.map((l) => l.options.name);

describe('buildListeners', () => {
  it('groups the client ingress, the replication paths (ingress and one egress per peer) and the controller path', () => {
    // Given a configuration with two peers, one controller and the default --fence-on-stop
    // When the listeners are built
    const { built, saslHandshake } = build();

    // Then each group holds what a stop drains in that step
    expect(names(built.client)).toEqual(['client']);
    expect(names(built.replication)).toEqual(['replication', 'egress-2', 'egress-3']);
    expect(names(built.controller)).toEqual(['controller-100']);
    expect(built.controller[0]!.options.opaque).toBe(true);
    expect(built.brokerFence).toBeDefined();
    // And without a WAL store every Kafka listener carries only ApiVersions and SaslHandshake, the
    // egress listeners also the one re-ask of a new leader's UNKNOWN_LEADER_EPOCH, shared by all
    const [ingress, ...egress] = built.replication;
    for (const listener of [...built.client, ingress!]) {
      expect(listener.options.filters).toHaveLength(2);
      expect(listener.options.filters).toContain(saslHandshake);
    }
    for (const listener of egress) {
      expect(listener.options.filters).toEqual([
        expect.any(ApiVersionsFilter),
        saslHandshake,
        built.fetchEpochWait,
      ]);
    }
    expect(built.fetchEpochWait).toBeInstanceOf(FetchEpochWaitFilter);
    expect(built.wal).toBeUndefined();
    expect(built.zoneRouting).toBeUndefined();
    expect(built.tlsMaterials).toEqual([]);
  });

  it('puts produce → WAL on the client ingress, the strip on the replication ingress and the fill on each egress', () => {
    // Given a WAL store
    const dir = mkdtempSync(path.join(os.tmpdir(), 'walproxy-listeners-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    // When the listeners are built
    const { built } = build({ 'wal-store-url': `file://${dir}`, 'wal-topic': 'wal-*' });

    // Then each path carries its side of the WAL
    const wal = built.wal!;
    expect(built.client[0]!.options.filters).toContain(wal.produceFilter);
    expect(built.replication[0]!.options.filters).toContain(wal.fetchStrip);
    // And on each egress the epoch wait sits before the fill: it sees the follower's request as
    // sent and the answer once filled (responses pass the filters last to first)
    for (const egress of built.replication.slice(1)) {
      expect(egress.options.filters.slice(-2)).toEqual([built.fetchEpochWait, wal.fetchFill]);
    }
    expect(built.controller[0]!.options.filters).toEqual([]);
  });

  it('has no broker fence without --fence-on-stop', () => {
    expect(build({ 'fence-on-stop': 'false' }).built.brokerFence).toBeUndefined();
  });

  it('caps what zone routing rewrites in the ApiVersions answers of the listeners it filters, and only there', async () => {
    // Given a sidecar with --zone
    const { built } = build({
      zone: 'zone-a',
      'zone-egress-listen-base': '19400',
      'zone-ingress-listen': '127.0.0.1:19500',
      'zone-bootstrap-listen': '127.0.0.1:19501',
      'zone-ingress-address-template': 'kafka-{id}:9194',
      'zone-sidecar': 'zone-a=sidecar-a',
      'zone-ingress-unauthenticated': 'true',
    });
    // When a broker's answer offering Metadata 14 and Fetch 19 passes each Kafka listener's chain
    const info = { apiKey: ApiKey.ApiVersions, apiVersion: 3, correlationId: 1 };
    const body = encodeApiVersionsResponse(
      {
        errorCode: 0,
        apiKeys: [
          { apiKey: ApiKey.Fetch, minVersion: 4, maxVersion: 19 },
          { apiKey: ApiKey.Metadata, minVersion: 0, maxVersion: 14 },
        ],
        throttleTimeMs: 0,
      },
      3,
    );
    const answer = Buffer.alloc(8 + body.length);
    answer.writeInt32BE(4 + body.length, 0);
    answer.writeInt32BE(1, 4);
    body.copy(answer, 8);
    const offered = async (filters: ConstructorParameters<typeof FilterChain>[0]) => {
      const out = await new FilterChain(filters).onResponse(info, answer);
      return decodeApiVersionsResponse(out.subarray(8), 3)
        .apiKeys.map((k) => k.maxVersion)
        .join(',');
    };
    const byListener: Record<string, string> = {};
    for (const l of [...built.client, ...built.replication])
      byListener[l.options.name] = await offered(l.options.filters);
    // Then Fetch is capped everywhere, Metadata where zone routing rewrites it
    expect(byListener).toEqual({
      client: '18,13',
      'zone-egress-1': '18,13',
      'zone-egress-2': '18,13',
      'zone-egress-3': '18,13',
      'zone-bootstrap': '18,13',
      'zone-ingress': '18,14',
      replication: '18,14',
      'egress-2': '18,14',
      'egress-3': '18,14',
    });
  });
});
