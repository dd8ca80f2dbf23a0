/**
 * Summarizes V8 CPU profiles of the sidecars (`node --cpu-prof`, written by the harness when
 * SIDECAR_CPU_PROF_DIR is set: e2e/src/cluster/kafka-cluster.ts) in CPU-seconds per produced GB:
 *
 * - by role: each sample goes to the first role found anywhere on its stack, in this order —
 *   follower fill (fetch-fill, range-reader, peer readers: the GETs it starts), leader strip
 *   (fetch-strip, batch index), leader produce path (produce-wal, wal-writer, sealing: the PUTs it
 *   starts), metadata topic, store completions (store code run from a socket event, no role above
 *   it: mostly GET bodies arriving), the pipe (net/, zone/), telemetry; samples with no walproxy
 *   frame at all go to GC, HTTP client internals, sockets/streams, or native ("(program)");
 * - by component: the module of each sample's innermost frame (self time), whatever its role —
 *   codec (shared/ messages and protocol), record batches/CRC, WAL object format, filters, WAL,
 *   store, signing/crypto, node:http, sockets/streams, GC …;
 * - the functions with the most self time.
 *
 * Shares are counted in samples (one per sampling interval while the main thread is not idle).
 * Only the main thread is sampled — V8's helper threads (concurrent GC, compilers) and libuv's pool
 * are not — and on a loaded machine a busy thread waiting for a core keeps being "busy" in wall
 * time. So the seconds are the sidecars' /proc CPU (`--cpu-s`, which the bench passes) apportioned
 * by those shares; without it, the sampled busy wall time.
 *
 *   npx tsx e2e/bench/profile-summary.ts <dir the bench wrote, with arm.json>
 *   npx tsx e2e/bench/profile-summary.ts --gb=<produced GB> [--cpu-s=<sidecar CPU-s>] <file.cpuprofile | dir> ...
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** Roles in the order a stack is searched: the first module that matches names the sample's role. */
const ROLES: readonly { role: string; modules: RegExp }[] = [
  {
    role: 'follower fill',
    modules: /^proxy\/(filters\/fetch-fill(-[a-z-]+)?|wal\/range-reader|wal\/peer-store-readers)$/,
  },
  { role: 'leader strip', modules: /^proxy\/(filters\/fetch-strip(-[a-z-]+)?|wal\/batch-index)$/ },
  {
    role: 'leader produce path',
    modules:
      /^proxy\/(filters\/produce-wal|wal\/(wal-writer|wal-writer-types|wal-uploader|tentative-appends|deferred|sealing-policy))$/,
  },
  // The metadata topic's producer is kafkajs; its GZIP runs in node:zlib, called from nowhere else.
  {
    role: 'metadata topic (publisher, kafkajs, GZIP)',
    modules: /^(proxy\/metadata\/|pkg\/kafkajs$|node:zlib$)/,
  },
  { role: 'store completions (no role on stack)', modules: /^proxy\/store\// },
  // The signer is async: what runs after its awaits has only the SDK's own frames on the stack.
  { role: 'store signing, AWS SDK (no role on stack)', modules: /^pkg\/(@smithy|@aws-sdk|@aws-crypto)\// },
  { role: 'pipe (net/, zone/)', modules: /^proxy\/(net|zone)\// },
  {
    role: 'telemetry, admin, logs',
    modules: /^(proxy\/(telemetry|admin)\/|proxy\/log$|pkg\/(pino|@opentelemetry)|pkg\/prom)/,
  },
  { role: 'other walproxy', modules: /^(proxy|shared)\// },
];

/** Components by a frame's module, first match wins. */
/** Node's native stream bindings (no script URL): the write syscalls of sockets. */
const SOCKET_WRITES = new Set([
  'writeBuffer',
  'writev',
  'writeLatin1String',
  'writeUtf8String',
  'writeAsciiString',
  'writeUcs2String',
]);

const COMPONENTS: readonly { component: string; modules: RegExp }[] = [
  { component: 'codec (shared/ messages, protocol)', modules: /^shared\/(messages|protocol|replication)\// },
  { component: 'record batches, CRC', modules: /^shared\/records\// },
  { component: 'WAL object format (shared/wal)', modules: /^shared\/wal\// },
  { component: 'filters', modules: /^proxy\/filters\// },
  { component: 'WAL writer, index, reader', modules: /^proxy\/wal\// },
  { component: 'store client', modules: /^proxy\/store\// },
  { component: 'pipe (net/, zone/)', modules: /^proxy\/(net|zone)\// },
  { component: 'metadata topic', modules: /^proxy\/metadata\// },
  {
    component: 'signing, crypto',
    modules: /^(node:crypto|node:internal\/crypto|pkg\/@smithy\/signature-v4|pkg\/@aws-crypto)/,
  },
  { component: 'node:http', modules: /^node:(_http|http|internal\/http)/ },
  {
    component: 'sockets, streams',
    modules: /^node:(net|stream|internal\/(stream|streams|net)|internal\/stream_base_commons)/,
  },
  {
    component: 'timers, promises, events',
    modules: /^node:(internal\/(timers|process\/task_queues|process\/promises|event_target)|events|timers)/,
  },
  { component: 'zlib', modules: /^node:(zlib|internal\/zlib)/ },
  {
    component: 'telemetry, logs',
    modules: /^(proxy\/(telemetry|admin)\/|proxy\/log$|pkg\/(pino|@opentelemetry))/,
  },
  { component: 'AWS SDK, other packages', modules: /^pkg\// },
  { component: 'other walproxy', modules: /^(proxy|shared)\// },
  { component: 'other node', modules: /^node:/ },
];

/**
 * Where a frame's code lives, as a short module name: `proxy/filters/fetch-fill`,
 * `shared/messages/fetch`, `pkg/@smithy/signature-v4`, `node:net`; '' for V8 builtins.
 */
export function moduleOf(url: string): string {
  if (url.startsWith('node:')) return url;
  const pkg = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (pkg) return `pkg/${pkg[1]}`;
  const own = /\/(proxy|shared)\/(?:dist|src)\/(.+?)\.[cm]?[jt]s$/.exec(url);
  if (own) return `${own[1]}/${own[2]}`;
  return url;
}

const SPECIAL = new Set(['(garbage collector)', '(program)', '(idle)', '(root)']);

export interface ProfileSummary {
  /** Wall seconds the main threads were sampled busy (not idle), all profiles summed. */
  busySeconds: number;
  /** Wall seconds sampled idle. */
  idleSeconds: number;
  /** Samples taken while busy; the maps below count samples. */
  busySamples: number;
  roles: Map<string, number>;
  /** Per role, its samples by component. */
  roleComponents: Map<string, Map<string, number>>;
  components: Map<string, number>;
  /** Self samples per `function module:line`. */
  functions: Map<string, number>;
}

function add(map: Map<string, number>, key: string): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

/**
 * The role and component of every sample of `profiles` taken within `window` (microseconds of
 * CLOCK_MONOTONIC, the clock of both V8's profile timestamps and `process.hrtime`), or of all.
 */
export function summarize(
  profiles: readonly CpuProfile[],
  window?: { startUs: number; endUs: number },
): ProfileSummary {
  const summary: ProfileSummary = {
    busySeconds: 0,
    idleSeconds: 0,
    busySamples: 0,
    roles: new Map(),
    roleComponents: new Map(),
    components: new Map(),
    functions: new Map(),
  };
  for (const profile of profiles) {
    const byId = new Map(profile.nodes.map((n) => [n.id, n]));
    const parent = new Map<number, number>();
    for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
    const roleOf = new Map<number, string>();
    const stackRole = (leaf: ProfileNode): string => {
      const known = roleOf.get(leaf.id);
      if (known !== undefined) return known;
      const modules: string[] = [];
      for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
        modules.push(moduleOf(byId.get(id)!.callFrame.url));
      }
      let role: string | undefined;
      for (const r of ROLES) {
        if (modules.some((m) => r.modules.test(m))) {
          role = r.role;
          break;
        }
      }
      role ??= fallbackRole(leaf.callFrame, modules);
      roleOf.set(leaf.id, role);
      return role;
    };
    // Sample i lasts until sample i+1 (timeDeltas[i+1]); the last one until endTime.
    const { samples, timeDeltas } = profile;
    let at = profile.startTime;
    for (let i = 0; i < samples.length; i++) {
      at += timeDeltas[i] ?? 0;
      const next = i + 1 < samples.length ? at + (timeDeltas[i + 1] ?? 0) : profile.endTime;
      if (window !== undefined && (at < window.startUs || at > window.endUs)) continue;
      const seconds = Math.max(0, next - at) / 1e6;
      const leaf = byId.get(samples[i]!)!;
      const frame = leaf.callFrame;
      if (frame.functionName === '(idle)') {
        summary.idleSeconds += seconds;
        continue;
      }
      summary.busySeconds += seconds;
      summary.busySamples++;
      const role = stackRole(leaf);
      const component = componentOf(frame);
      add(summary.roles, role);
      add(summary.components, component);
      let within = summary.roleComponents.get(role);
      if (within === undefined) {
        within = new Map();
        summary.roleComponents.set(role, within);
      }
      add(within, component);
      const module = moduleOf(frame.url);
      const name = SPECIAL.has(frame.functionName)
        ? frame.functionName
        : `${frame.functionName || '(anonymous)'} ${module || '(V8 builtin)'}${module ? `:${frame.lineNumber + 1}` : ''}`;
      add(summary.functions, name);
    }
  }
  return summary;
}

/** The role of a sample with no walproxy frame on its stack. */
function fallbackRole(leaf: CallFrame, modules: readonly string[]): string {
  if (leaf.functionName === '(garbage collector)') return 'GC';
  if (leaf.functionName === '(program)') return 'native, unattributed ("(program)")';
  if (modules.some((m) => /^node:(_http|http|internal\/http)/.test(m)))
    return 'HTTP client internals (no walproxy frame)';
  if (
    modules.some((m) =>
      /^node:(net|stream|internal\/(stream|streams|net)|internal\/stream_base_commons)/.test(m),
    )
  )
    return 'sockets, streams (no walproxy frame)';
  return 'other';
}

function componentOf(frame: CallFrame): string {
  if (frame.functionName === '(garbage collector)') return 'GC';
  if (frame.functionName === '(program)') return 'native, unattributed ("(program)")';
  const module = moduleOf(frame.url);
  if (module === '' && SOCKET_WRITES.has(frame.functionName)) return 'socket writes (native)';
  if (module === '') return 'V8 builtins, native bindings';
  return COMPONENTS.find((c) => c.modules.test(module))?.component ?? 'other';
}

/** Every `.cpuprofile` in the given files and directories (recursively). */
export function profileFiles(paths: readonly string[]): string[] {
  const files: string[] = [];
  for (const p of paths) {
    if (statSync(p).isDirectory()) {
      files.push(...profileFiles(readdirSync(p).map((name) => path.join(p, name))));
    } else if (p.endsWith('.cpuprofile')) {
      files.push(p);
    }
  }
  return files.sort();
}

export function readProfiles(files: readonly string[]): CpuProfile[] {
  return files.map((f) => JSON.parse(readFileSync(f, 'utf8')) as CpuProfile);
}

/**
 * Markdown tables of `summary` in CPU-seconds per produced GB (`gb` produced while profiled):
 * `cpuSeconds` (the profiled processes' CPU) apportioned by sample shares, or the busy wall time.
 */
export function formatSummary(
  summary: ProfileSummary,
  gb: number,
  cpuSeconds?: number,
  topFunctions = 25,
): string {
  const total = cpuSeconds ?? summary.busySeconds;
  const perGb = (samples: number) => ((total * samples) / summary.busySamples / gb).toFixed(2);
  const pct = (samples: number) => `${((100 * samples) / summary.busySamples).toFixed(1)} %`;
  const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]);
  const lines = [
    `main threads sampled busy ${summary.busySeconds.toFixed(1)} s (${summary.busySamples} samples), idle ${summary.idleSeconds.toFixed(1)} s; ${gb.toFixed(3)} GB produced; ` +
      (cpuSeconds === undefined
        ? `seconds below: sampled busy time, ${(total / gb).toFixed(2)} s per GB`
        : `seconds below: ${cpuSeconds.toFixed(1)} CPU-s (/proc, every thread) apportioned by samples, ${(total / gb).toFixed(2)} CPU-s per GB`),
    '',
    '| role (first on the stack) | CPU-s per GB | share | of which (components, CPU-s per GB) |',
    '|---|---:|---:|---|',
    ...sorted(summary.roles).map(
      ([k, s]) =>
        `| ${k} | ${perGb(s)} | ${pct(s)} | ${sorted(summary.roleComponents.get(k) ?? new Map())
          .slice(0, 3)
          .map(([c, n]) => `${c} ${perGb(n)}`)
          .join('; ')} |`,
    ),
    '',
    '| component (self time) | CPU-s per GB | share |',
    '|---|---:|---:|',
    ...sorted(summary.components).map(([k, s]) => `| ${k} | ${perGb(s)} | ${pct(s)} |`),
    '',
    '| function (self time) | CPU-s per GB | share |',
    '|---|---:|---:|',
    ...sorted(summary.functions)
      .slice(0, topFunctions)
      .map(([k, s]) => `| \`${k}\` | ${perGb(s)} | ${pct(s)} |`),
  ];
  return lines.join('\n');
}

/**
 * What the bench knows of a profiled arm, written beside its profiles (`arm.json`), so that the
 * summary can be printed again from the directory alone.
 */
export interface ProfiledArm {
  gb: number;
  /** The sidecars' /proc CPU over the window. */
  cpuSeconds: number;
  window: { startUs: number; endUs: number };
}

function main(): void {
  const args = process.argv.slice(2);
  const flag = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const paths = args.filter((a) => !a.startsWith('--'));
  const armFile = paths.length === 1 ? path.join(paths[0]!, 'arm.json') : undefined;
  const arm =
    armFile !== undefined && existsSync(armFile)
      ? (JSON.parse(readFileSync(armFile, 'utf8')) as ProfiledArm)
      : undefined;
  const gb = Number(flag('gb') ?? arm?.gb);
  if (!(gb > 0) || paths.length === 0) {
    console.error(
      'usage: profile-summary.ts [--gb=<produced GB>] [--cpu-s=<CPU-s>] <dir with arm.json | file.cpuprofile | dir> ...',
    );
    process.exit(2);
  }
  const cpu = flag('cpu-s');
  const cpuSeconds = cpu !== undefined ? Number(cpu) : arm?.cpuSeconds;
  const files = profileFiles(paths);
  if (files.length === 0) throw new Error(`no .cpuprofile files in ${paths.join(', ')}`);
  console.log(`${files.length} profiles: ${files.map((f) => path.basename(f)).join(', ')}\n`);
  console.log(formatSummary(summarize(readProfiles(files), arm?.window), gb, cpuSeconds));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main();
