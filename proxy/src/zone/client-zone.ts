/**
 * How a client's zone is known without a change to the client's code (docs/zone-local.md):
 * 1. `walproxy_az=<zone>` anywhere in its client.id (AutoMQ's `automq_az=`, WarpStream's
 *    `warpstream_az=` and Aiven's `diskless_az=` are the same idea);
 * 2. the zone of the listener it reached: a zone egress or the zone bootstrap of a sidecar;
 * 3. the client.rack it sent in a Fetch (KIP-392), remembered for its address and client.id.
 * In that order: the hint is the only one meant for walproxy; a client.rack may be any string.
 */
const HINT = /(?:^|[^A-Za-z0-9_])walproxy_az=([A-Za-z0-9._:-]+)/;

/** The zone a client.id names with `walproxy_az=<zone>`, if any. */
export function zoneHintOf(clientId: string | null): string | undefined {
  if (clientId === null || !clientId.includes('walproxy_az=')) return undefined;
  return HINT.exec(clientId)?.[1];
}

/**
 * The zones that clients' Fetch requests named as client.rack, by client address and client.id,
 * so a later Metadata answer on any connection of the same client can send it to its zone. An
 * insertion-ordered map evicts the oldest entry past `capacity`: memory stays bounded however
 * many clients come and go.
 */
export class RackMemory {
  private readonly zones = new Map<string, string>();

  constructor(private readonly capacity = 10_000) {}

  get size(): number {
    return this.zones.size;
  }

  remember(address: string | undefined, clientId: string | null, zone: string): void {
    const key = keyOf(address, clientId);
    if (key === undefined) return;
    if (this.zones.get(key) === zone) return;
    this.zones.delete(key);
    this.zones.set(key, zone);
    if (this.zones.size > this.capacity) this.zones.delete(this.zones.keys().next().value!);
  }

  zoneOf(address: string | undefined, clientId: string | null): string | undefined {
    const key = keyOf(address, clientId);
    return key === undefined ? undefined : this.zones.get(key);
  }
}

function keyOf(address: string | undefined, clientId: string | null): string | undefined {
  // Without an address two clients that share a client.id could not be told apart.
  return address === undefined ? undefined : `${address}|${clientId ?? ''}`;
}
