// Metrics of what shortens the acks=all round through the WAL (issue #26), kept apart from
// metrics.ts: batches stored ahead of the broker's answer (produce-wal.ts) and the prefetch hints
// between the two sides (prefetch-hints.ts). Observed from the stats objects at collection;
// nothing per message.
import type { Attributes, Meter, ObservableResult } from '@opentelemetry/api';
import type { WalStatsSources } from './sources.js';

type Observe = (result: ObservableResult<Attributes>) => void;

export function observeRound(meter: Meter, wal: WalStatsSources): void {
  const counter = (name: string, unit: string, description: string, observe: Observe) =>
    meter.createObservableCounter(name, { unit, description }).addCallback(observe);
  counter(
    'walproxy.produce.stored_ahead',
    '{batch}',
    'Batches stored ahead of the broker’s answer (their connection’s last Produce to the topic was appended), by outcome: appended, or refused (left in its object, never referenced nor indexed)',
    (r) => {
      const p = wal.produce();
      r.observe(p.batchesStoredAhead - p.batchesStoredAheadRefused, { outcome: 'appended' });
      r.observe(p.batchesStoredAheadRefused, { outcome: 'refused' });
    },
  );
  counter(
    'walproxy.produce.stored_ahead.refused.bytes',
    'By',
    'Bytes of batches stored ahead that the broker then refused: in the bucket until the objects expire',
    (r) => r.observe(wal.produce().bytesStoredAheadRefused),
  );
  counter(
    'walproxy.fetch.prefetch.hints',
    '{object}',
    'Objects named in prefetch hints: side=leader sent; side=follower received, and started (read ahead into the cache)',
    (r) => {
      r.observe(wal.fetchStrip().prefetchHintsSent, { side: 'leader', outcome: 'sent' });
      const fill = wal.fetchFill();
      r.observe(fill.prefetchHints, { side: 'follower', outcome: 'received' });
      r.observe(fill.prefetchesStarted, { side: 'follower', outcome: 'started' });
    },
  );
}
