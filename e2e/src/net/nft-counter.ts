import { execFileSync } from 'node:child_process';

/**
 * Kernel byte counters (nftables) for TCP traffic to and from a set of local ports: what crosses
 * the "zone" hop, counted by the kernel independently of walproxy's own counters. Every loopback
 * packet passes the output hook once, so one rule per direction counts each byte once
 * (IP and TCP headers included). Needs root and the nft tool (Debian package nftables).
 */
export class NftPortCounter {
  private constructor(
    readonly table: string,
    private readonly ports: number[],
  ) {}

  static create(name: string, ports: number[]): NftPortCounter {
    const table = `walproxy_${name.replace(/[^a-z0-9_]/gi, '_')}`;
    const set = ports.join(', ');
    nft(['add', 'table', 'inet', table]);
    nft(['add', 'chain', 'inet', table, 'out', '{ type filter hook output priority 0; policy accept; }']);
    nft(['add', 'rule', 'inet', table, 'out', 'tcp', 'sport', `{ ${set} }`, 'counter', 'comment', '"from"']);
    nft(['add', 'rule', 'inet', table, 'out', 'tcp', 'dport', `{ ${set} }`, 'counter', 'comment', '"to"']);
    return new NftPortCounter(table, ports);
  }

  /** Bytes counted so far, both directions. */
  bytes(): number {
    const listing = nft(['list', 'table', 'inet', this.table]);
    return [...listing.matchAll(/counter packets \d+ bytes (\d+)/g)].reduce(
      (sum, m) => sum + Number(m[1]),
      0,
    );
  }

  remove(): void {
    try {
      nft(['delete', 'table', 'inet', this.table]);
    } catch {
      // already gone
    }
  }

  toString(): string {
    return `nft table inet ${this.table} (ports ${this.ports.join(',')})`;
  }
}

export function nftAvailable(): boolean {
  try {
    nft(['list', 'tables']);
    return true;
  } catch {
    return false;
  }
}

function nft(args: string[]): string {
  return execFileSync('nft', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}
