import { readFileSync } from 'node:fs';
import net from 'node:net';

/**
 * The port plan of one local cluster. Every port is basePort + a fixed offset, so a run's
 * layout can be read from its logs, and two runs with different bases never collide.
 *
 *   controller                      base + 0
 *   broker N CLIENT (upstream)      base + 10 + N   bound on loopback, advertised at the sidecar
 *   broker N REPLICATION (upstream) base + 20 + N   inter-broker listener, advertised at egress
 *   broker N DIRECT                 base + 60 + N   baseline path that bypasses the sidecars
 *   sidecar N client ingress        base + 30 + N
 *   sidecar N replication ingress   base + 40 + N
 *   egress for broker N             base + 50 + N   (what broker N advertises for REPLICATION)
 *   sidecar N admin HTTP            base + 70 + N
 *   sidecar N controller path       base + 80 + N   (for the one voter, id 100: the broker's
 *                                                    controller.quorum.voters names it)
 */
export interface PortPlan {
  base: number;
  controller: number;
  brokerClient(id: number): number;
  brokerReplication(id: number): number;
  brokerDirect(id: number): number;
  sidecarClient(id: number): number;
  sidecarReplication(id: number): number;
  egress(id: number): number;
  sidecarAdmin(id: number): number;
  /**
   * --controller-listen-base of sidecar N for a controller with id `controllerId`: its listener
   * for that voter (base + controllerId) is then base + 80 + N.
   */
  sidecarControllerBase(id: number, controllerId: number): number;
}

export function portPlan(base: number): PortPlan {
  return {
    base,
    controller: base,
    brokerClient: (id) => base + 10 + id,
    brokerReplication: (id) => base + 20 + id,
    brokerDirect: (id) => base + 60 + id,
    sidecarClient: (id) => base + 30 + id,
    sidecarReplication: (id) => base + 40 + id,
    egress: (id) => base + 50 + id,
    sidecarAdmin: (id) => base + 70 + id,
    sidecarControllerBase: (id, controllerId) => base + 80 + id - controllerId,
  };
}

async function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * The first port the kernel hands out for outgoing connections (net.ipv4.ip_local_port_range).
 * Blocks are chosen below it: a port that is free when checked, but inside the ephemeral range,
 * can be taken by any outgoing connection (a client of another cluster) before a broker binds it.
 */
function ephemeralPortStart(): number {
  try {
    const first = Number(
      readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0],
    );
    return Number.isInteger(first) && first > 2_000 ? first : 32_768;
  } catch {
    return 32_768;
  }
}

/** Finds a base port whose whole block of 100 ports is free on loopback, below the ephemeral range. */
export async function findFreeBase(): Promise<number> {
  const lowest = 10_000;
  const blocks = Math.floor((ephemeralPortStart() - 100 - lowest) / 100);
  if (blocks < 1) throw new Error('no room for a block of 100 ports below the ephemeral port range');
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = lowest + 100 * Math.floor(Math.random() * blocks);
    let allFree = true;
    for (let offset = 0; offset < 90 && allFree; offset++) allFree = await isFree(base + offset);
    if (allFree) return base;
  }
  throw new Error(`no free block of 100 loopback ports between ${lowest} and the ephemeral range`);
}
