import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';

/**
 * A child process of the harness: output goes to a log file (kept when a test fails) and to a
 * bounded in-memory tail that `waitForOutput` scans, so readiness is read from what the process
 * itself says.
 */
export class ManagedProcess {
  private readonly child: ChildProcess;
  private readonly logStream: WriteStream;
  private tail = '';
  private readonly waiters = new Set<() => void>();
  readonly exited: Promise<number | null>;
  /** When the process was spawned (Date.now()): where a start's duration begins. */
  readonly spawnedAt: number;

  constructor(
    readonly name: string,
    command: string,
    args: string[],
    readonly logFile: string,
    env: NodeJS.ProcessEnv = process.env,
  ) {
    this.logStream = createWriteStream(logFile, { flags: 'a' });
    this.spawnedAt = Date.now();
    this.child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const onData = (chunk: Buffer) => {
      this.logStream.write(chunk);
      this.tail = (this.tail + chunk.toString('utf8')).slice(-64 * 1024);
      for (const wake of this.waiters) wake();
    };
    this.child.stdout!.on('data', onData);
    this.child.stderr!.on('data', onData);
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.logStream.end(`\n[harness] ${name} exited code=${code} signal=${signal}\n`);
        for (const wake of this.waiters) wake();
        resolve(code);
      });
    });
    liveProcesses.add(this);
    void this.exited.then(() => liveProcesses.delete(this));
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  output(): string {
    return this.tail;
  }

  /** Resolves when the output matches `pattern`; rejects on exit or timeout, quoting the tail. */
  async waitForOutput(pattern: RegExp, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pattern.test(this.tail)) {
      if (!this.running) {
        throw new Error(
          `${this.name} exited before printing ${pattern}; log ${this.logFile}:\n${this.tail.slice(-3000)}`,
        );
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(
          `${this.name} did not print ${pattern} within ${timeoutMs} ms; log ${this.logFile}:\n${this.tail.slice(-3000)}`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.min(left, 500));
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.waiters.add(done);
      }).finally(() => this.waiters.clear());
    }
  }

  /** Sends `signal`, then SIGKILL after `graceMs` if the process is still there. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = 10_000): Promise<void> {
    if (!this.running) return;
    this.child.kill(signal);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

const liveProcesses = new Set<{ readonly pid?: number | undefined }>();

/**
 * Registers a child spawned outside ManagedProcess (a client tool's JVM) for the same end: killed
 * when the harness's process exits, whichever way. Without it a test that fails before stopping
 * its producers leaves their JVMs loading the machine for their whole timeout (minutes), and the
 * e2e files after it measure on a busier machine than they think.
 */
export function killWithHarness(child: ChildProcess): void {
  liveProcesses.add(child);
  child.once('exit', () => liveProcesses.delete(child));
}

// Whatever way the harness's own process ends, it takes its children with it: no orphan JVMs.
process.once('exit', () => {
  for (const p of liveProcesses) {
    if (p.pid !== undefined) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
});
