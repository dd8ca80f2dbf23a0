import { isWalWriteError, type WalAppendTicket } from '../../src/wal/index.js';

/** What became of a ticket's batch: 'stored', or the WalWriteError kind it was refused with. */
export async function kindOf(ticket: WalAppendTicket): Promise<string> {
  return ticket.durable.then(
    () => 'stored',
    (error: unknown) => (isWalWriteError(error) ? error.kind : String(error)),
  );
}
