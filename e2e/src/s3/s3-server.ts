/**
 * What tests and benchmarks need of a real S3 API server, whichever it is: moto (API conformance),
 * versitygw (speed), or the store front in front of either (latency and faults). Plus the child
 * process plumbing the three share.
 */
import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

export interface S3Server {
  /** `http://<ip>:<port>`: an IP, so the SDK addresses directory buckets path-style. */
  readonly endpoint: string;
  /** The server's process id (tests SIGSTOP it; benchmarks read its CPU from /proc). */
  readonly pid: number;
  /** Creates a bucket; directory-bucket names (`--x-s3`) are sent as plain path-style requests. */
  createBucket(name: string): Promise<void>;
  /** Stops the server and waits for it to exit. */
  stop(): Promise<void>;
}

/** How every server here is placed: on an address, optionally in a network namespace. */
export interface S3ServerPlacement {
  /** Address to bind (default 127.0.0.1), e.g. the object store's address in a zone network. */
  host?: string;
  /** Network namespace to run the server in (e2e/src/net/zone-network.ts); absent: the caller's. */
  netns?: string;
  /** Milliseconds to wait for the started server to answer. */
  readyTimeoutMs?: number;
}

/** `command args`, run in `netns` when given; `ip netns exec` execs, so the pid stays the command's. */
export function inNetns(netns: string | undefined, command: string, args: string[]): [string, string[]] {
  return netns === undefined ? [command, args] : ['ip', ['netns', 'exec', netns, command, ...args]];
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the child has exited. */
export async function terminate(child: ChildProcess, graceMs = 5_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** utime + stime of a process and all its threads, in seconds (/proc/<pid>/stat fields 14 and 15). */
export function processCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may contain spaces; the fields after it are fixed.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
}

/**
 * Read and write system calls a process (all its threads) has made so far: /proc/<pid>/io's
 * syscr and syscw (read(2)/readv(2) and write(2)/writev(2), which libuv uses for TCP; not
 * sendmsg(2)). Each socket write on loopback also runs the receiver's network stack in the
 * writer's time, so their count, not only their bytes, prices a hop.
 */
export function processSyscalls(pid: number): { reads: number; writes: number } {
  const io = readFileSync(`/proc/${pid}/io`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, 'm').exec(io)?.[1] ?? Number.NaN);
  return { reads: field('syscr'), writes: field('syscw') };
}

/** USER_HZ, which the kernel fixes at 100 on Linux for /proc's tick counts (`getconf CLK_TCK`). */
const CLOCK_TICKS_PER_SECOND = 100;

/**
 * The TCP ports `pid` listens on, read from /proc: the process's socket inodes (its fds) matched
 * against its network namespace's LISTEN sockets. For servers that bind port 0 and do not say
 * which port they got; works inside a network namespace, since /proc/<pid>/net is the process's.
 */
export function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match) inodes.add(match[1]!);
    } catch {
      // the fd closed while we looked
    }
  }
  const ports: number[] = [];
  for (const table of ['tcp', 'tcp6']) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      const fields = line.trim().split(/\s+/);
      const LISTEN = '0A';
      if (fields.length < 10 || fields[3] !== LISTEN || !inodes.has(fields[9]!)) continue;
      ports.push(Number.parseInt(fields[1]!.split(':')[1]!, 16));
    }
  }
  return ports;
}
