import { execFileSync } from 'node:child_process';

/**
 * Three availability zones on one machine, built from Linux network namespaces (iproute2) and
 * veth links, so that what crosses a zone boundary is counted by the kernel, not by walproxy.
 *
 *   root namespace (the test runner and its clients)      198.18.B.200/28 ──┐
 *   fabric namespace: one bridge per zone + services, IP forwarding, nft counters
 *     zone-a bridge 198.18.B+1.1/24 ── pod of broker 1  198.18.B+1.11  (broker + sidecar share lo)
 *     zone-b bridge 198.18.B+2.1/24 ── pod of broker 2  198.18.B+2.12
 *     zone-c bridge 198.18.B+3.1/24 ── pod of broker 3  198.18.B+3.13
 *     services      198.18.B+4.1/24 ── controller 198.18.B+4.10, object store 198.18.B+4.20
 *     clients of zone-a/b/c 198.18.B+6/7/8.1/24 ── client namespace 198.18.B+6/7/8.100  (zoneClients)
 *
 * As in Kubernetes, each broker pod has its own `localhost`: the broker's data listeners and the
 * sidecar's egress are on the pod's loopback; only the sidecar's ingresses (and the harness's
 * DIRECT baseline listener) are on the pod address. Every packet between namespaces is routed by
 * the fabric, whose forward hook counts bytes by (source zone, destination zone), with the object
 * store, the controller and the clients as their own endpoints.
 *
 * Addresses come only from 198.18.0.0/15 (RFC 2544 benchmarking). Each instance takes a free
 * block B = 16 * slot, so concurrent runs do not collide; namespaces are named after the owning
 * process, and `create` removes those left behind by processes that no longer exist.
 * Needs root, iproute2 and nft.
 */
export const ZONES = ['zone-a', 'zone-b', 'zone-c'] as const;
export type Zone = (typeof ZONES)[number];

/** The namespace of clients running in a zone (ZoneNetworkOptions.zoneClients). */
export type ZoneClients = `clients-${Zone}`;

/** Endpoints the fabric counts traffic between. */
export type Endpoint = Zone | 'store' | 'controller' | 'clients' | ZoneClients;

export const ZONE_CLIENTS: readonly ZoneClients[] = ZONES.map((zone) => `clients-${zone}` as const);

export interface ZoneNetworkOptions {
  /**
   * Also one client namespace per zone, on a subnet of its own routed through the fabric, so
   * that what a zone's clients send to and receive from each zone is counted too.
   */
  zoneClients?: boolean;
}

const PREFIX = 'wpz';
const MAX_SLOTS = 15;

export interface PodPlacement {
  /** Network namespace the pod's processes run in. */
  netns: string;
  /** The pod's address, reachable from every other namespace and from the root namespace. */
  address: string;
  zone: Zone;
}

export interface ZoneTraffic {
  /** Bytes (IP packets, headers included) from each endpoint to each other endpoint. */
  bytes: Record<Endpoint, Record<Endpoint, number>>;
}

export class ZoneNetwork {
  private removed = false;
  private readonly onExit = () => this.remove();

  private constructor(
    readonly slot: number,
    readonly owner: number,
    private readonly brokerZones: ReadonlyMap<number, Zone>,
    private readonly options: ZoneNetworkOptions = {},
  ) {}

  /**
   * Builds the namespaces, links, routes and counters. `brokerZones`: broker id → zone, one pod
   * per broker. Throws (after undoing what it built) when anything is refused.
   */
  static create(brokerZones: ReadonlyMap<number, Zone>, options: ZoneNetworkOptions = {}): ZoneNetwork {
    removeOrphans();
    const used = new Set(listNamespaces().map((ns) => parseName(ns)?.slot));
    let slot = 0;
    while (used.has(slot)) slot++;
    if (slot >= MAX_SLOTS) throw new Error(`no free zone-network slot (${MAX_SLOTS} in use)`);
    const network = new ZoneNetwork(slot, process.pid, brokerZones, options);
    try {
      network.build();
    } catch (error) {
      network.remove();
      throw error;
    }
    process.once('exit', network.onExit);
    return network;
  }

  private get base(): number {
    return 16 * this.slot;
  }

  private ns(role: string): string {
    return `${PREFIX}${this.slot}-${this.owner}-${role}`;
  }

  private subnet(endpoint: Endpoint): string {
    return `198.18.${this.thirdOctet(endpoint)}.0/24`;
  }

  private thirdOctet(endpoint: Endpoint): number {
    switch (endpoint) {
      case 'zone-a':
        return this.base + 1;
      case 'zone-b':
        return this.base + 2;
      case 'zone-c':
        return this.base + 3;
      case 'store':
      case 'controller':
        return this.base + 4;
      case 'clients':
        return this.base + 5;
      case 'clients-zone-a':
        return this.base + 6;
      case 'clients-zone-b':
        return this.base + 7;
      case 'clients-zone-c':
        return this.base + 8;
    }
  }

  get fabricNetns(): string {
    return this.ns('fabric');
  }

  /** Where the processes of broker `id`'s pod run and how others reach them. */
  pod(brokerId: number): PodPlacement {
    const zone = this.brokerZones.get(brokerId);
    if (zone === undefined) throw new Error(`broker ${brokerId} has no pod in this network`);
    return {
      netns: this.ns(`b${brokerId}`),
      address: `198.18.${this.thirdOctet(zone)}.${10 + brokerId}`,
      zone,
    };
  }

  get controller(): { netns: string; address: string } {
    return { netns: this.ns('ctl'), address: `198.18.${this.base + 4}.10` };
  }

  get store(): { netns: string; address: string } {
    return { netns: this.ns('s3'), address: `198.18.${this.base + 4}.20` };
  }

  /** The namespace of `zone`'s clients (created with `zoneClients`) and its address. */
  zoneClients(zone: Zone): { netns: string; address: string } {
    if (!this.options.zoneClients)
      throw new Error('this zone network has no client namespaces (zoneClients)');
    return {
      netns: this.ns(`c${ZONES.indexOf(zone) + 1}`),
      address: `198.18.${this.thirdOctet(`clients-${zone}`)}.100`,
    };
  }

  /** `command args` as run inside namespace `netns` (`ip netns exec` execs, so the pid is the command's). */
  static wrap(netns: string, command: string, args: string[]): [string, string[]] {
    return ['ip', ['netns', 'exec', netns, command, ...args]];
  }

  private build(): void {
    const fabric = this.fabricNetns;
    ip(['netns', 'add', fabric]);
    ipIn(fabric, ['link', 'set', 'lo', 'up']);
    sysctlIn(fabric, 'net.ipv4.ip_forward=1');

    const bridges: Array<[string, Endpoint]> = [
      ['bz1', 'zone-a'],
      ['bz2', 'zone-b'],
      ['bz3', 'zone-c'],
      ['bsvc', 'store'],
      ...(this.options.zoneClients
        ? ZONES.map((zone, i): [string, Endpoint] => [`bc${i + 1}`, `clients-${zone}`])
        : []),
    ];
    for (const [bridge, endpoint] of bridges) {
      ipIn(fabric, ['link', 'add', bridge, 'type', 'bridge']);
      ipIn(fabric, ['addr', 'add', `198.18.${this.thirdOctet(endpoint)}.1/24`, 'dev', bridge]);
      ipIn(fabric, ['link', 'set', bridge, 'up']);
    }
    const hosts: Array<{ netns: string; address: string; bridge: string; tag: string }> = [
      ...[...this.brokerZones.keys()].map((id) => {
        const pod = this.pod(id);
        return { ...pod, bridge: `bz${ZONES.indexOf(pod.zone) + 1}`, tag: `b${id}` };
      }),
      { ...this.controller, bridge: 'bsvc', tag: 'ctl' },
      { ...this.store, bridge: 'bsvc', tag: 's3' },
      ...(this.options.zoneClients
        ? ZONES.map((zone, i) => ({ ...this.zoneClients(zone), bridge: `bc${i + 1}`, tag: `c${i + 1}` }))
        : []),
    ];
    for (const host of hosts) {
      ip(['netns', 'add', host.netns]);
      ipIn(host.netns, ['link', 'set', 'lo', 'up']);
      // The host end is created inside the host namespace as eth0; the other end joins the bridge.
      ipIn(fabric, [
        'link',
        'add',
        `v-${host.tag}`,
        'type',
        'veth',
        'peer',
        'name',
        'eth0',
        'netns',
        host.netns,
      ]);
      ipIn(fabric, ['link', 'set', `v-${host.tag}`, 'master', host.bridge, 'up']);
      ipIn(host.netns, ['addr', 'add', `${host.address}/24`, 'dev', 'eth0']);
      ipIn(host.netns, ['link', 'set', 'eth0', 'up']);
      const gateway = host.address.replace(/\.\d+$/, '.1');
      ipIn(host.netns, ['route', 'add', 'default', 'via', gateway]);
    }

    // The root namespace (test runner, clients) reaches the block through one uplink.
    const clients = this.base + 5;
    const rootLink = this.rootLink;
    ip(['link', 'add', rootLink, 'type', 'veth', 'peer', 'name', 'uplink', 'netns', fabric]);
    ip(['addr', 'add', `198.18.${clients}.2/24`, 'dev', rootLink]);
    ip(['link', 'set', rootLink, 'up']);
    ipIn(fabric, ['addr', 'add', `198.18.${clients}.1/24`, 'dev', 'uplink']);
    ipIn(fabric, ['link', 'set', 'uplink', 'up']);
    for (const endpoint of ['zone-a', 'zone-b', 'zone-c', 'store'] as const) {
      ip(['route', 'add', this.subnet(endpoint), 'via', `198.18.${clients}.1`, 'dev', rootLink]);
    }
    this.installCounters();
  }

  /** The root namespace's end of the uplink (interface names are at most 15 characters). */
  private get rootLink(): string {
    return `${PREFIX}${this.slot}r${this.owner % 100_000}`.slice(0, 15);
  }

  /** The address the root namespace (clients, the test runner) has on the block. */
  get clientAddress(): string {
    return `198.18.${this.base + 5}.2`;
  }

  private endpointMatch(endpoint: Endpoint, direction: 'saddr' | 'daddr'): string[] {
    switch (endpoint) {
      case 'store':
        return ['ip', direction, this.store.address];
      case 'controller':
        return ['ip', direction, this.controller.address];
      default:
        return ['ip', direction, this.subnet(endpoint)];
    }
  }

  private static readonly ENDPOINTS: readonly Endpoint[] = [
    ...ZONES,
    'store',
    'controller',
    'clients',
    ...ZONE_CLIENTS,
  ];

  /** One counter per ordered pair of endpoints, in the fabric's forward hook (routed packets only). */
  private installCounters(): void {
    const fabric = this.fabricNetns;
    nftIn(fabric, ['add', 'table', 'ip', 'walproxy_zones']);
    nftIn(fabric, [
      'add',
      'chain',
      'ip',
      'walproxy_zones',
      'between',
      '{ type filter hook forward priority 0; policy accept; }',
    ]);
    for (const from of ZoneNetwork.ENDPOINTS) {
      for (const to of ZoneNetwork.ENDPOINTS) {
        if (from === to) continue;
        nftIn(fabric, [
          'add',
          'rule',
          'ip',
          'walproxy_zones',
          'between',
          ...this.endpointMatch(from, 'saddr'),
          ...this.endpointMatch(to, 'daddr'),
          'counter',
          'comment',
          `"${from}>${to}"`,
        ]);
      }
    }
  }

  /** The kernel's byte counts so far, by source and destination endpoint. */
  traffic(): ZoneTraffic {
    const listing = JSON.parse(nftIn(this.fabricNetns, ['-j', 'list', 'table', 'ip', 'walproxy_zones'])) as {
      nftables: Array<{ rule?: { comment?: string; expr: Array<{ counter?: { bytes: number } }> } }>;
    };
    const bytes = Object.fromEntries(
      ZoneNetwork.ENDPOINTS.map((from) => [
        from,
        Object.fromEntries(ZoneNetwork.ENDPOINTS.map((to) => [to, 0])),
      ]),
    ) as ZoneTraffic['bytes'];
    for (const item of listing.nftables) {
      const rule = item.rule;
      if (!rule?.comment) continue;
      const [from, to] = rule.comment.split('>') as [Endpoint, Endpoint];
      const counter = rule.expr.find((e) => e.counter)?.counter;
      if (counter) bytes[from][to] = counter.bytes;
    }
    return { bytes };
  }

  /** Removes every namespace and link of this network. Idempotent; safe after a partial build. */
  remove(): void {
    if (this.removed) return;
    this.removed = true;
    process.off('exit', this.onExit);
    removeNamespaces(listNamespaces().filter((ns) => ns.startsWith(`${PREFIX}${this.slot}-${this.owner}-`)));
    // The uplink would go with the fabric namespace, but only once the kernel has torn it down;
    // deleting it now frees the slot's routes at once.
    try {
      execFileSync('ip', ['link', 'del', this.rootLink], { stdio: 'ignore' });
    } catch {
      // already gone with the fabric
    }
  }
}

/** Bytes that crossed between two different zones, both directions, from a traffic reading. */
export function crossZoneBytes(traffic: ZoneTraffic): number {
  let sum = 0;
  for (const from of ZONES) for (const to of ZONES) if (from !== to) sum += traffic.bytes[from][to];
  return sum;
}

/** The zone an endpoint is in: a zone and its clients are; the store, controller and root clients are not. */
export function zoneOf(endpoint: Endpoint): Zone | undefined {
  if ((ZONES as readonly string[]).includes(endpoint)) return endpoint as Zone;
  if (endpoint.startsWith('clients-')) return endpoint.slice('clients-'.length) as Zone;
  return undefined;
}

/**
 * Every byte between two different zones, both directions, the zones' client namespaces counted
 * in their zone: brokers' pods to each other, and each zone's clients to other zones' pods.
 */
export function crossZoneBytesWithClients(traffic: ZoneTraffic): number {
  return Object.values(crossZonePairs(traffic)).reduce((sum, bytes) => sum + bytes, 0);
}

/**
 * The same bytes by endpoint pair, `from>to`, zones' client namespaces included: each pair in
 * different zones that exchanged a byte.
 */
export function crossZonePairs(traffic: ZoneTraffic): Record<string, number> {
  const pairs: Record<string, number> = {};
  for (const [from, row] of Object.entries(traffic.bytes) as Array<[Endpoint, Record<Endpoint, number>]>) {
    for (const [to, bytes] of Object.entries(row) as Array<[Endpoint, number]>) {
      const a = zoneOf(from);
      const b = zoneOf(to);
      if (a !== undefined && b !== undefined && a !== b && bytes > 0) pairs[`${from}>${to}`] = bytes;
    }
  }
  return pairs;
}

/** Bytes between the zones and the object store, both directions. */
export function storeBytes(traffic: ZoneTraffic): number {
  let sum = 0;
  for (const zone of ZONES) sum += traffic.bytes[zone].store + traffic.bytes.store[zone];
  return sum;
}

/** The difference `after - before`, pair by pair. */
export function trafficSince(before: ZoneTraffic, after: ZoneTraffic): ZoneTraffic {
  const bytes = structuredClone(after.bytes);
  for (const from of Object.keys(bytes) as Endpoint[])
    for (const to of Object.keys(bytes[from]) as Endpoint[]) bytes[from][to] -= before.bytes[from][to];
  return { bytes };
}

export function zoneNetworkAvailable(): boolean {
  try {
    execFileSync('ip', ['netns', 'list'], { stdio: 'ignore' });
    execFileSync('nft', ['--version'], { stdio: 'ignore' });
    return process.getuid?.() === 0;
  } catch {
    return false;
  }
}

function parseName(ns: string): { slot: number; owner: number } | undefined {
  const match = new RegExp(`^${PREFIX}(\\d+)-(\\d+)-`).exec(ns);
  return match ? { slot: Number(match[1]), owner: Number(match[2]) } : undefined;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Namespaces left by harness processes that died without cleaning up (kill -9, OOM). */
function removeOrphans(): void {
  removeNamespaces(
    listNamespaces().filter((ns) => {
      const parsed = parseName(ns);
      return parsed !== undefined && parsed.owner !== process.pid && !processAlive(parsed.owner);
    }),
  );
}

function listNamespaces(): string[] {
  return execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })
    .split('\n')
    .map((line) => line.split(' ')[0]!)
    .filter((name) => name.startsWith(PREFIX));
}

/** Kills what still runs inside each namespace, then deletes it (its veth ends go with it). */
function removeNamespaces(namespaces: string[]): void {
  for (const ns of namespaces) {
    try {
      const pids = execFileSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' })
        .split('\n')
        .filter(Boolean);
      for (const pid of pids) {
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch {
          // already gone
        }
      }
    } catch {
      // namespace already half gone
    }
    try {
      execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
    } catch {
      // already gone
    }
  }
}

function ip(args: string[]): string {
  return run('ip', args);
}

function ipIn(netns: string, args: string[]): string {
  return run('ip', ['-n', netns, ...args]);
}

function sysctlIn(netns: string, setting: string): void {
  run('ip', ['netns', 'exec', netns, 'sysctl', '-q', '-w', setting]);
}

function nftIn(netns: string, args: string[]): string {
  return run('ip', ['netns', 'exec', netns, 'nft', ...args]);
}

function run(command: string, args: string[]): string {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    throw new Error(`${command} ${args.join(' ')} failed: ${stderr.trim() || (error as Error).message}`);
  }
}
