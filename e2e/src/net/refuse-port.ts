// A server that refuses: every packet sent to a loopback TCP port is answered with a reset, by an
// nftables rule in the machine's own network namespace (the shared cluster runs there). New
// connections get ECONNREFUSED and open ones are reset at their next write, as when an S3
// endpoint's listener is gone, while the server process keeps its state (moto keeps its objects,
// so the files after still read what they wrote). Needs root and nft, as the zone scenarios do.
import { execFileSync } from 'node:child_process';

/** One table, so that a run that died with the rule in place is cleaned by the next one. */
const TABLE = 'walproxy_e2e_refuse';

function nft(args: string[]): void {
  execFileSync('nft', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Resets every TCP packet to 127.0.0.1:`port` until the returned function is called. */
export function refuseLoopbackPort(port: number): () => void {
  restoreLoopbackPorts();
  nft(['add', 'table', 'inet', TABLE]);
  nft(['add', 'chain', 'inet', TABLE, 'out', '{ type filter hook output priority 0 ; policy accept ; }']);
  nft([
    'add',
    'rule',
    'inet',
    TABLE,
    'out',
    'ip',
    'daddr',
    '127.0.0.1',
    'tcp',
    'dport',
    String(port),
    'reject',
    'with',
    'tcp',
    'reset',
  ]);
  return restoreLoopbackPorts;
}

/** Removes every refusal (idempotent). */
export function restoreLoopbackPorts(): void {
  try {
    nft(['delete', 'table', 'inet', TABLE]);
  } catch {
    // no such table: nothing refused
  }
}
