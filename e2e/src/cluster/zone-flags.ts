import { BROKER_IDS, RACKS } from './kafka-cluster.js';

/** Where the zone listeners of one e2e cluster listen (issue #15): the same ports on every pod. */
export interface ZonePorts {
  /** The zone egress of broker N listens on egressBase + N. */
  egressBase: number;
  ingress: number;
  bootstrap: number;
}

/** The ports the three-zone e2e files and benchmarks use, clear of the harness's own listeners. */
export const ZONE_PORTS: ZonePorts = { egressBase: 61_000, ingress: 61_010, bootstrap: 61_020 };

/**
 * The sidecar flags that put broker `id`'s sidecar in its rack's zone, with zone listeners on
 * `host(id)` and every peer's zone ingress and sidecar named by `host(peer)`.
 */
export function zoneSidecarFlags(
  id: number,
  host: (id: number) => string,
  ports: ZonePorts = ZONE_PORTS,
): string[] {
  return [
    `--zone=${RACKS[id]}`,
    `--zone-egress-listen-base=${ports.egressBase}`,
    `--zone-egress-listen-host=${host(id)}`,
    `--zone-ingress-listen=${host(id)}:${ports.ingress}`,
    ...BROKER_IDS.map((peer) => `--zone-ingress-address=${peer}=${host(peer)}:${ports.ingress}`),
    `--zone-bootstrap-listen=${host(id)}:${ports.bootstrap}`,
    ...BROKER_IDS.map((peer) => `--zone-sidecar=${RACKS[peer]}=${host(peer)}`),
  ];
}
