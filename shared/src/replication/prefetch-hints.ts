// Prefetch hints (issue #26): the leader side names WAL objects it has stored ahead of its broker's
// log, so that the follower side's GETs run while the broker is still working through the
// requests those objects hold, instead of after the reference arrives. A separate tag with its own
// version, like the trace context (wal-trace.ts): the follower side asks for hints, a leader side
// that does not know the tag forwards it to its broker, which skips it (KIP-482), and answers
// without hints; a stock broker never sees the response tag (the follower side drops it).
//
// Fetch request, top-level tag PREFETCH_HINTS_TAG (added by the follower's egress sidecar with the
// capability tag):
//   Version int8 (= 1) — the hint format the follower side reads
//
// Fetch response, top-level tag PREFETCH_HINTS_TAG (added by the leader's replication ingress, only
// to a response it rewrote with references, for a request that asked in a version it writes):
//   Version int8 (= 1)
//   Stores COMPACT_ARRAY of COMPACT_STRING — store URLs, as in the segment lists
//   Objects COMPACT_ARRAY of: a stored object that holds batches of partitions this follower
//     fetches and that no reference named to it yet
//     Store uvarint — index into Stores
//     ObjectKey COMPACT_STRING
//     Size uvarint — the object's bytes: a follower side reads whole only objects it may cache
// A hint is only a hint: the follower side reads a hinted object into its cache or not at all, and
// only references ever put bytes into a follower's log (each proven by its digest, as always).

import { Reader } from '../protocol/reader.js';
import { Writer } from '../protocol/writer.js';

export const PREFETCH_HINTS_TAG = 27_004;
export const PREFETCH_HINTS_VERSION = 1;

export interface PrefetchHint {
  store: string;
  objectKey: string;
  size: number;
}

const CTX = { api: 'WalproxyPrefetchHints', version: PREFETCH_HINTS_VERSION, flexible: true };

/** The request tag's bytes: the version of hints the follower side reads. */
export function encodePrefetchHintsWanted(): Buffer {
  const w = new Writer(CTX, 1);
  w.int8(PREFETCH_HINTS_VERSION, 'Version');
  return w.finish();
}

/** Whether a request's tag asks for hints in a version this build writes. */
export function wantsPrefetchHints(data: Buffer): boolean {
  return data.length >= 1 && data.readInt8(0) === PREFETCH_HINTS_VERSION;
}

export function encodePrefetchHints(hints: readonly PrefetchHint[]): Buffer {
  const stores: string[] = [];
  const storeIndex = new Map<string, number>();
  for (const h of hints) {
    if (!storeIndex.has(h.store)) {
      storeIndex.set(h.store, stores.length);
      stores.push(h.store);
    }
  }
  const w = new Writer(CTX, 16 + hints.length * 96);
  w.int8(PREFETCH_HINTS_VERSION, 'Version');
  w.compactArray(stores, 'Stores', (w2, store) => w2.compactString(store, 'Store'));
  w.compactArray(hints, 'Objects', (w2, h) => {
    w2.uvarint(storeIndex.get(h.store)!, 'Store');
    w2.compactString(h.objectKey, 'ObjectKey');
    w2.uvarint(h.size, 'Size');
  });
  return w.finish();
}

/**
 * The hints, or undefined when the tag is another version or unreadable: a hint is an optimisation,
 * so a bad one costs the prefetch, never the fill.
 */
export function decodePrefetchHints(data: Buffer): PrefetchHint[] | undefined {
  try {
    const r = new Reader(data, CTX);
    if (r.int8('Version') !== PREFETCH_HINTS_VERSION) return undefined;
    const stores = r.compactArray('Stores', (r2) => r2.compactString('Store'));
    const hints = r.compactArray('Objects', (r2) => {
      const at = r2.uvarint('Store');
      const store = stores[at] ?? r2.fail('INVALID_VALUE', 'Store', `store ${at} of ${stores.length}`);
      return { store, objectKey: r2.compactString('ObjectKey'), size: r2.uvarint('Size') };
    });
    r.done('WalproxyPrefetchHints');
    return hints;
  } catch {
    return undefined;
  }
}
