// What the commands share on the terminal: exit codes (2 for any bad setting, as `walproxy
// sidecar` has always exited), flag errors written out, a progress line (`walproxy wal …`).
import type { FlagErrors } from '../config/flag-values.js';

export const EXIT_PROBLEMS = 1;
export const EXIT_CONFIG_ERROR = 2;

/** Writes every error as `walproxy <command>: --flag: reason` and exits 2 when there is any. */
export function exitOnFlagErrors(errors: FlagErrors, command: string): void {
  if (errors.list.length === 0) return;
  for (const line of errors.list) process.stderr.write(`walproxy ${command}: ${line}\n`);
  process.exit(EXIT_CONFIG_ERROR);
}

/** Writes a progress line on a terminal only (stderr), at most every 100 ms; silent when piped. */
export class Progress {
  private last = 0;
  private shown = false;
  constructor(private readonly enabled = process.stderr.isTTY === true) {}
  update(text: string): void {
    if (!this.enabled) return;
    const now = Date.now();
    if (now - this.last < 100) return;
    this.last = now;
    this.shown = true;
    process.stderr.write(`\r\x1b[K${text}`);
  }
  done(): void {
    if (this.shown) process.stderr.write('\r\x1b[K');
    this.shown = false;
  }
}
