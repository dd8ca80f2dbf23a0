/**
 * What whole-frame reassembly costs a relay, apart from everything else a sidecar does: one
 * process, a source server writing 1 MiB Kafka-framed responses, a relay, and a sink, on loopback.
 * Arms, interleaved in one run:
 *   - `pipe`: the relay is `upstream.pipe(downstream)` (the bare-pipe floor of the benchmarks);
 *   - `frames`: the relay splits the stream with walproxy's FrameDecoder — the path a replication
 *     Fetch response takes (assembled whole, then written on) — and writes each frame at once;
 *   - `frames-held`: the same, but each frame is written HOLD_MS later (a leader side holding a
 *     follower's response for its uploads, a follower side waiting for its GETs), so frames live
 *     across young-generation collections.
 * Prints per arm: CPU-seconds of the process per GiB relayed (source and sink included: same in
 * every arm), and V8's collections by kind (perf_hooks). Asserts nothing.
 *
 * `npx tsx proxy/bench/frame-relay.bench.ts` (BENCH_GIB, default 2; BENCH_ROUNDS, default 2; BENCH_FRAME_BYTES, default 1 MiB;
 * BENCH_HOLD_MS, default 20).
 */
import net from 'node:net';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { FrameDecoder } from '../src/net/frame-decoder.js';

const FRAME_BYTES = Number(process.env.BENCH_FRAME_BYTES ?? 1 << 20);
const TOTAL_BYTES = Number(process.env.BENCH_GIB ?? 2) * 1024 ** 3;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const HOLD_MS = Number(process.env.BENCH_HOLD_MS ?? 20);
type Arm = 'pipe' | 'frames' | 'frames-held' | 'frames-held-pooled';
const ARMS: Arm[] = ['pipe', 'frames', 'frames-held', 'frames-held-pooled'];

/**
 * Whole frames assembled into buffers taken from a pool and given back once their write has
 * completed (the socket's write callback): what reusing assembly buffers could save a sidecar, as
 * a ceiling — this relay keeps no other view of a frame, which a sidecar's filters may.
 */
class PooledAssembler {
  private readonly free: Buffer[] = [];
  private frame: Buffer | undefined;
  private filled = 0;
  private readonly head = Buffer.alloc(4);
  private headBytes = 0;
  allocated = 0;

  push(chunk: Buffer, onFrame: (frame: Buffer) => void): void {
    let offset = 0;
    while (offset < chunk.length) {
      if (!this.frame) {
        const n = Math.min(4 - this.headBytes, chunk.length - offset);
        chunk.copy(this.head, this.headBytes, offset, offset + n);
        this.headBytes += n;
        offset += n;
        if (this.headBytes < 4) return;
        const size = this.head.readInt32BE(0) + 4;
        this.frame = this.take(size);
        this.head.copy(this.frame, 0);
        this.filled = 4;
        this.headBytes = 0;
      }
      const n = Math.min(this.frame.length - this.filled, chunk.length - offset);
      chunk.copy(this.frame, this.filled, offset, offset + n);
      this.filled += n;
      offset += n;
      if (this.filled === this.frame.length) {
        const done = this.frame;
        this.frame = undefined;
        onFrame(done);
      }
    }
  }

  release(frame: Buffer): void {
    this.free.push(frame);
  }

  private take(size: number): Buffer {
    const i = this.free.findIndex((b) => b.length === size);
    if (i >= 0) return this.free.splice(i, 1)[0]!;
    this.allocated++;
    return Buffer.allocUnsafe(size);
  }
}

const gc = { minor: 0, major: 0, incremental: 0, ms: 0 };
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    gc.ms += entry.duration;
    const kind = (entry as unknown as { detail?: { kind?: number } }).detail?.kind;
    if (kind === constants.NODE_PERFORMANCE_GC_MINOR) gc.minor++;
    else if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) gc.major++;
    else gc.incremental++;
  }
}).observe({ entryTypes: ['gc'] });

function listen(server: net.Server): Promise<number> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)),
  );
}

/**
 * Splits `upstream` into whole frames and writes each to `downstream`, at once (`frames`) or
 * HOLD_MS later; with `frames-held-pooled` the frames are assembled in pooled buffers, each given
 * back once its write has completed.
 */
function relayFrames(upstream: net.Socket, downstream: net.Socket, arm: Exclude<Arm, 'pipe'>): void {
  const pool = arm === 'frames-held-pooled' ? new PooledAssembler() : undefined;
  const decoder = new FrameDecoder(FRAME_BYTES * 2, 4);
  const split = (chunk: Buffer, onFrame: (frame: Buffer) => void) => {
    if (pool) pool.push(chunk, onFrame);
    else for (const frame of decoder.push(chunk)) onFrame(frame);
  };
  const write = (frame: Buffer) => {
    if (!downstream.write(frame, pool ? () => pool.release(frame) : undefined)) upstream.pause();
  };
  let held = 0;
  let ended = false;
  upstream.on('data', (chunk: Buffer) =>
    split(chunk, (frame) => {
      if (arm === 'frames') return write(frame);
      held++;
      setTimeout(() => {
        write(frame);
        if (--held === 0 && ended) downstream.end();
      }, HOLD_MS);
    }),
  );
  downstream.on('drain', () => upstream.resume());
  upstream.on('end', () => {
    ended = true;
    if (held === 0) downstream.end();
  });
}

async function runArm(arm: Arm): Promise<{ cpuSPerGib: number; gc: typeof gc; gib: number }> {
  const frame = Buffer.alloc(FRAME_BYTES, 7);
  frame.writeInt32BE(FRAME_BYTES - 4, 0);
  const source = net.createServer((socket) => {
    let sent = 0;
    const pump = () => {
      while (sent < TOTAL_BYTES) {
        sent += FRAME_BYTES;
        if (!socket.write(frame)) {
          socket.once('drain', pump);
          return;
        }
      }
      socket.end();
    };
    pump();
  });
  let received = 0;
  let sinkDone!: () => void;
  const finished = new Promise<void>((resolve) => {
    sinkDone = resolve;
  });
  const sink = net.createServer((socket) => {
    socket.on('data', (chunk: Buffer) => {
      received += chunk.length;
    });
    socket.on('end', () => sinkDone());
  });
  const [sourcePort, sinkPort] = [await listen(source), await listen(sink)];
  Object.assign(gc, { minor: 0, major: 0, incremental: 0, ms: 0 });
  const cpuBefore = process.cpuUsage();
  const upstream = net.connect({ port: sourcePort, host: '127.0.0.1' });
  const downstream = net.connect({ port: sinkPort, host: '127.0.0.1' });
  if (arm === 'pipe') upstream.pipe(downstream);
  else relayFrames(upstream, downstream, arm);
  await finished;
  const cpu = process.cpuUsage(cpuBefore);
  const result = {
    cpuSPerGib: (cpu.user + cpu.system) / 1e6 / (received / 1024 ** 3),
    gc: { ...gc, ms: Math.round(gc.ms) },
    gib: received / 1024 ** 3,
  };
  source.close();
  sink.close();
  return result;
}

const results = new Map<Arm, Awaited<ReturnType<typeof runArm>>[]>(ARMS.map((a) => [a, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const arm of round % 2 === 0 ? ARMS : [...ARMS].reverse()) {
    const r = await runArm(arm);
    results.get(arm)!.push(r);
    console.error(
      `[bench] round ${round} ${arm}: ${r.cpuSPerGib.toFixed(2)} CPU-s/GiB, gc ${JSON.stringify(r.gc)}`,
    );
  }
}
console.log(
  `frame relay, ${ROUNDS} round(s) of ${TOTAL_BYTES / 1024 ** 3} GiB of ${FRAME_BYTES} B frames per arm, hold ${HOLD_MS} ms; node ${process.version}`,
);
console.log('| arm | CPU-s per GiB (rounds) | minor / major / incremental GCs (rounds) | GC ms (rounds) |');
console.log('|---|---|---|---|');
const pipeMean = results.get('pipe')!.reduce((n, r) => n + r.cpuSPerGib, 0) / ROUNDS;
for (const [arm, runs] of results) {
  const mean = runs.reduce((n, r) => n + r.cpuSPerGib, 0) / runs.length;
  console.log(
    `| ${arm} | ${mean.toFixed(2)} (${runs.map((r) => r.cpuSPerGib.toFixed(2)).join(', ')}), ${(mean / pipeMean).toFixed(2)}× pipe | ${runs.map((r) => `${r.gc.minor} / ${r.gc.major} / ${r.gc.incremental}`).join('; ')} | ${runs.map((r) => r.gc.ms).join(', ')} |`,
  );
}
process.exit(0);
