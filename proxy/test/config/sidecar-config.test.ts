import { describe, expect, it } from 'vitest';
import { parseSidecarConfig, peerAddress } from '../../src/config/sidecar-config.js';

const minimal = {
  'broker-id': '1',
  'client-listen': '0.0.0.0:9192',
  'client-upstream': '127.0.0.1:9092',
};

function errorsOf(raw: Record<string, unknown>): string[] {
  const result = parseSidecarConfig(raw);
  return 'errors' in result ? result.errors : [];
}

describe('parseSidecarConfig', () => {
  it('accepts the minimal client-only configuration with documented defaults', () => {
    const result = parseSidecarConfig(minimal);
    expect('config' in result && result.config).toMatchObject({
      brokerId: 1,
      clientListen: { host: '0.0.0.0', port: 9192 },
      clientUpstream: { host: '127.0.0.1', port: 9092 },
      egressBrokerIds: [],
      maxFrameBytes: 104_857_600,
      adminListen: { host: '0.0.0.0', port: 9180 },
    });
  });

  it('leaves durable ack off unless asked: a store outage must not fail produce by default', () => {
    const result = parseSidecarConfig({
      ...minimal,
      'wal-store-url': 'file:///tmp/wal',
      'wal-topic': ['orders'],
    });
    if (!('config' in result)) throw new Error(result.errors.join('\n'));
    expect(result.config.wal?.defaults.durableAck).toBe(false);
    const asked = parseSidecarConfig({
      ...minimal,
      'wal-store-url': 'file:///tmp/wal',
      'wal-topic': ['orders'],
      'topic-config': ['orders:durable.ack=true'],
    });
    if (!('config' in asked)) throw new Error(asked.errors.join('\n'));
    expect(asked.config.wal?.rules.at(-1)?.settings).toEqual({ durableAck: true });
  });

  it('takes the follower fill deadline, 250 ms unless told, refusing one past 10 s', () => {
    // Given a WAL sidecar without and with --fill-deadline-ms
    const wal = { ...minimal, 'wal-store-url': 'file:///tmp/wal', 'wal-topic': ['wal-*'] };
    const defaulted = parseSidecarConfig(wal);
    const set = parseSidecarConfig({ ...wal, 'fill-deadline-ms': '100' });

    // Then the default is FETCH_FILL_DEADLINE_MS, a set value is kept, and a too long one refused
    expect('config' in defaulted && defaulted.config.wal?.fillDeadlineMs).toBe(250);
    expect('config' in set && set.config.wal?.fillDeadlineMs).toBe(100);
    expect(errorsOf({ ...wal, 'fill-deadline-ms': '10001' })).toEqual([
      "--fill-deadline-ms: '10001' is not a whole number from 0 to 10000",
    ]);
  });

  it('gives WAL topics a latency budget, mode auto and 1 MB objects; linger.ms only when asked (deprecated)', () => {
    const wal = { ...minimal, 'wal-store-url': 'file:///tmp/wal', 'wal-topic': ['orders'] };
    const result = parseSidecarConfig(wal);
    if (!('config' in result)) throw new Error(result.errors.join('\n'));
    expect(result.config.wal?.defaults).toEqual({
      wal: false,
      latencyBudgetMs: 50,
      targetBytes: 1_000_000,
      durableAck: false,
      mode: 'auto',
      maxHoldMs: 200,
      zoneLocal: false,
    });
    expect(result.config.wal?.cost).toMatchObject({
      replicationFactor: 3,
      zones: 3,
      exitAfterMs: 60_000,
      enterAfterPayingObjects: 3,
      minDwellMs: 30_000,
      rateWindowMs: 10_000,
      prices: { storeClass: 'S3 Express One Zone' },
    });
    const asked = parseSidecarConfig({
      ...wal,
      'wal-latency-budget-ms': '25',
      'wal-linger-ms': '5',
      'topic-config': ['orders:latency.budget.ms=200'],
      'cost-zones': '2',
    });
    if (!('config' in asked)) throw new Error(asked.errors.join('\n'));
    expect(asked.config.wal?.defaults).toMatchObject({ latencyBudgetMs: 25, lingerMs: 5 });
    expect(asked.config.wal?.rules.at(-1)?.settings).toEqual({ latencyBudgetMs: 200 });
    expect(asked.config.wal?.cost.zones).toBe(2);
  });

  it('names a bad budget, price file or layout', () => {
    expect(
      errorsOf({
        ...minimal,
        'wal-store-url': 'file:///tmp/wal',
        'wal-latency-budget-ms': '0',
        'cost-prices': '/nonexistent/prices.json',
        'cost-replication-factor': '0',
        'topic-config': ['x:latency.budget.ms=fast'],
      }),
    ).toEqual([
      "--topic-config: latency.budget.ms in 'x:latency.budget.ms=fast': 'fast' is not a whole number of milliseconds from 1 to 60000",
      "--wal-latency-budget-ms: '0' is not a whole number from 1 to 60000",
      expect.stringMatching(/^--cost-prices: cannot read \/nonexistent\/prices\.json: ENOENT/),
      "--cost-replication-factor: '0' is not a whole number from 1 to 32",
    ]);
  });

  it('derives egress ids from the peer addresses, leaving out our own id', () => {
    const result = parseSidecarConfig({
      ...minimal,
      'egress-listen-base': '19000',
      'peer-address': ['0=a:9193', '1=b:9193', '2=c:9193'],
    });
    if (!('config' in result)) throw new Error(result.errors.join('\n'));
    expect(result.config.egressBrokerIds).toEqual([0, 2]);
    expect(peerAddress(result.config, 2)).toEqual({ host: 'c', port: 9193 });
  });

  it('resolves peers from the template, explicit entries winning', () => {
    const result = parseSidecarConfig({
      ...minimal,
      'egress-listen-base': '19000',
      'egress-broker-ids': ['0,2'],
      'peer-address-template': 'kafka-{id}.kafka-headless:9193',
      'peer-address': ['2=10.0.0.9:1234'],
    });
    if (!('config' in result)) throw new Error(result.errors.join('\n'));
    expect(peerAddress(result.config, 0)).toEqual({ host: 'kafka-0.kafka-headless', port: 9193 });
    expect(peerAddress(result.config, 2)).toEqual({ host: '10.0.0.9', port: 1234 });
  });

  it('reports every bad setting at once, one line each naming the flag', () => {
    const errors = errorsOf({
      'broker-id': 'one',
      'client-listen': 'nope',
      'client-upstream': '127.0.0.1:70000',
      'max-frame-bytes': '12',
      'log-level': 'loud',
      'peer-address': ['x=y'],
    });
    expect(errors).toEqual([
      "--broker-id: 'one' is not a whole number from 0 to 2147483647",
      "--client-listen: 'nope' is not host:port",
      "--client-upstream: port 70000 in '127.0.0.1:70000' is outside 1-65535",
      "--peer-address: 'x=y' is not <broker-id>=<host:port>",
      "--max-frame-bytes: '12' is not a whole number from 1024 to 2147483647",
      "--log-level: 'loud' is not one of fatal, error, warn, info, debug, trace, silent",
    ]);
  });

  it('names the missing required flags', () => {
    expect(errorsOf({})).toEqual([
      '--broker-id: is required (the node.id of the broker in this pod)',
      '--client-listen: is required (host:port)',
      '--client-upstream: is required (host:port)',
    ]);
  });

  it('requires a peer address and a base port for every egress', () => {
    expect(errorsOf({ ...minimal, 'egress-broker-ids': ['2'] })).toEqual([
      '--egress-listen-base: is required when egress broker ids are given (egress for broker N listens on base+N)',
    ]);
    expect(errorsOf({ ...minimal, 'egress-broker-ids': ['2'], 'egress-listen-base': '19000' })).toEqual([
      '--peer-address: no address for broker 2: give --peer-address=2=host:port or --peer-address-template',
    ]);
  });

  it('rejects a template without {id} and half a replication pair', () => {
    expect(errorsOf({ ...minimal, 'peer-address-template': 'kafka:9193' })).toEqual([
      "--peer-address-template: 'kafka:9193' must be host:port containing {id}, e.g. kafka-{id}.kafka-headless:9193",
    ]);
    expect(errorsOf({ ...minimal, 'replication-listen': '0.0.0.0:9193' })).toEqual([
      '--replication-upstream: is required when the other replication flag is set',
    ]);
  });
  it('opens one controller listener per voter on base+id, forwarding to its address', () => {
    const result = parseSidecarConfig({
      ...minimal,
      'controller-listen-base': '19500',
      'controller-address': ['100=kafka-controller-0.h:9094', '101=kafka-controller-1.h:9094'],
    });
    if (!('config' in result)) throw new Error(result.errors.join('\n'));
    expect(result.config.controllerListenBase).toBe(19_500);
    expect(result.config.controllerListenHost).toBe('127.0.0.1');
    expect([...result.config.controllerAddresses]).toEqual([
      [100, { host: 'kafka-controller-0.h', port: 9094 }],
      [101, { host: 'kafka-controller-1.h', port: 9094 }],
    ]);
  });

  it('needs both controller flags, ports in range and apart from the egress ports', () => {
    expect(errorsOf({ ...minimal, 'controller-address': '100=c:9094' })).toEqual([
      '--controller-listen-base: is required with --controller-address (the listener for controller id V is on base+V)',
    ]);
    expect(errorsOf({ ...minimal, 'controller-listen-base': '19500' })).toEqual([
      '--controller-address: is required with --controller-listen-base: <controller-id>=<host:port> of each voter',
    ]);
    expect(
      errorsOf({ ...minimal, 'controller-listen-base': '65500', 'controller-address': ['100=c:9094', 'x'] }),
    ).toEqual([
      "--controller-address: 'x' is not <controller-id>=<host:port>",
      '--controller-listen-base: base 65500 + controller id 100 is past port 65535',
    ]);
    expect(
      errorsOf({
        ...minimal,
        'egress-listen-base': '19000',
        'peer-address': ['2=b:9193'],
        'controller-listen-base': '18902',
        'controller-address': '100=c:9094',
      }),
    ).toEqual(['--controller-listen-base: port 19002 (controller 100) is also an egress port']);
  });

  it('leaves the memory-derived bounds unset unless given, and refuses a limit too small to serve', () => {
    const result = parseSidecarConfig(minimal);
    if (!('config' in result)) throw new Error(result.errors.join('\n'));
    expect(result.config.maxBufferedBytes).toBeUndefined();
    expect(result.config.memoryLimitBytes).toBeUndefined();
    const given = parseSidecarConfig({
      ...minimal,
      'memory-limit-bytes': '268435456',
      'max-buffered-bytes': '65536',
    });
    if (!('config' in given)) throw new Error(given.errors.join('\n'));
    expect(given.config).toMatchObject({ memoryLimitBytes: 268_435_456, maxBufferedBytes: 65_536 });
    expect(errorsOf({ ...minimal, 'memory-limit-bytes': '1000000' })).toEqual([
      "--memory-limit-bytes: '1000000' is not a whole number from 134217728 to 1125899906842624",
    ]);
  });
  describe('one dialect for every flag of the sidecar (flag-values.ts)', () => {
    const everything = {
      ...minimal,
      'egress-listen-base': '19000',
      'peer-address-template': 'kafka-{id}.kafka-headless:9193',
      'egress-broker-ids': '2',
      'wal-store-url': 'file:///tmp/wal',
      'wal-topic': ['orders'],
      zone: 'zone-a',
      'zone-egress-listen-base': '29000',
      'zone-ingress-address-template': 'kafka-{id}.kafka-headless:9194',
      'zone-sidecar': ['zone-a=kafka-zone-a'],
    };
    const booleans = [
      'fence-on-stop',
      'wal-durable-ack',
      'wal-seal-when-producers-wait',
      'peer-tls',
      'peer-tls-verify-hostname',
      'metadata-tls',
      's3-force-path-style',
      's3-disable-express-session-auth',
      'zone-client-rack',
      'zone-ingress-unauthenticated',
    ];

    it('reads numbers, text and templates through the same floor: last value, blanks refused', () => {
      const result = parseSidecarConfig({
        ...everything,
        'drain-timeout-ms': ['5000', '7000'],
        'log-level': ['debug', 'warn'],
        'peer-address-template': ['a-{id}:1', 'b-{id}:2'],
      });
      if (!('config' in result)) throw new Error(result.errors.join('\n'));
      expect(result.config).toMatchObject({
        drainTimeoutMs: 7000,
        logLevel: 'warn',
        peerAddressTemplate: 'b-{id}:2',
      });
      // Number('  ') is 0: a blank timeout was a zero timeout.
      expect(errorsOf({ ...minimal, 'drain-timeout-ms': '  ' })).toEqual([
        "--drain-timeout-ms: '  ' is not a whole number from 0 to 600000",
      ]);
    });

    it('refuses any word but true or false with the same line, naming the flag', () => {
      for (const flag of booleans) {
        expect(errorsOf({ ...everything, [flag]: 'yes' }), flag).toEqual([
          `--${flag}: 'yes' is not true or false`,
        ]);
      }
    });

    it('takes the last value of a flag given twice, as the TLS, SASL and S3 flags always did', () => {
      const result = parseSidecarConfig({
        ...everything,
        'fence-on-stop': ['true', 'false'],
        'wal-durable-ack': ['false', 'true'],
        'wal-seal-when-producers-wait': ['true', 'false'],
        's3-force-path-style': ['false', 'true'],
        'zone-client-rack': ['true', 'false'],
      });
      if (!('config' in result)) throw new Error(result.errors.join('\n'));
      const { config } = result;
      expect(config.fenceOnStop).toBe(false);
      expect(config.wal?.defaults.durableAck).toBe(true);
      expect(config.wal?.sealWhenProducersWait).toBe(false);
      expect(config.wal?.storeOptions.forcePathStyle).toBe(true);
      expect(config.zone?.rackFromFetch).toBe(false);
      const adminOff = parseSidecarConfig({ ...minimal, 'admin-listen': ['0.0.0.0:9180', 'off'] });
      if (!('config' in adminOff)) throw new Error(adminOff.errors.join('\n'));
      expect(adminOff.config.adminListen).toBeUndefined();
    });
  });
});
