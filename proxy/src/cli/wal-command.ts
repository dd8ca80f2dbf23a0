import { parseWalObject } from '@walproxy/shared';
import type { Argv } from 'yargs';
import { Parser } from 'yargs/helpers';
import { FlagErrors, flag, parseDuration, parseTime, present } from '../config/flag-values.js';
import { parseStoreFlags, type StoreFlags, storeOptions } from '../config/s3-flags.js';
import { WAL_METADATA_TOPIC } from '../metadata/wal-metadata-publisher.js';
import { isObjectStoreError, type ObjectStore, openObjectStore } from '../store/index.js';
import { DataDirLogs } from '../tools/broker-logs.js';
import { deleteObjects, selectForGc } from '../tools/gc.js';
import { readMetadataTopic } from '../tools/metadata-reader.js';
import { INFO_KINDS, verifyWal } from '../tools/verify.js';
import { describePartitions, listWalObjects, mapLimit, readObjectIndex } from '../tools/wal-index.js';
import { EXIT_CONFIG_ERROR, EXIT_PROBLEMS, exitOnFlagErrors, Progress } from './terminal.js';

type Raw = Record<string, unknown>;

function kafkaOptions<T>(yargs: Argv<T>, describeBootstrap: string): Argv<T> {
  return yargs
    .option('bootstrap', { type: 'string', array: true, describe: describeBootstrap })
    .option('metadata-topic', {
      type: 'string',
      describe: 'the WAL index topic the sidecars publish to',
      default: WAL_METADATA_TOPIC,
    });
}

function timeOptions<T>(yargs: Argv<T>): Argv<T> {
  return yargs
    .option('since', {
      type: 'string',
      describe: 'only objects created at or after this (ISO 8601, epoch ms, or a duration ago like 2h)',
    })
    .option('until', {
      type: 'string',
      describe: 'only objects created before this (ISO 8601, epoch ms, or a duration ago like 2h)',
    });
}

const json = { type: 'boolean', describe: 'print the result as JSON', default: false } as const;

/**
 * The `wal` commands. `args`: the command line as given (the arguments yargs parses), for the one
 * flag that must come from it alone: `wal gc --delete`.
 */
export function walCommands(yargs: Argv, args: readonly string[]): Argv {
  return yargs
    .command(
      'ls',
      'list WAL objects: size, creation time, batches and partitions (from each footer), totals',
      (y) =>
        timeOptions(storeOptions(y))
          .option('footers', {
            type: 'boolean',
            describe: 'read each footer for batches and partitions (--no-footers: list keys and sizes only)',
            default: true,
          })
          .option('json', json),
      (argv) => run('wal ls', argv, runLs),
    )
    .command(
      'inspect <key>',
      "one WAL object: header, trailer, the footer's index per batch, and with --bootstrap the offsets the metadata topic records for each batch",
      (y) =>
        kafkaOptions(
          storeOptions(y, false),
          'Kafka bootstrap servers (host:port, repeatable or comma-separated) to read the metadata topic',
        )
          .positional('key', {
            type: 'string',
            describe: 'object key relative to --store-url, as wal ls prints it',
          })
          .option('check-batches', {
            type: 'boolean',
            describe: 'download the whole object and check every batch (length, magic, CRC-32C)',
            default: false,
          })
          .option('json', json),
      (argv) => run('wal inspect', argv, runInspect),
    )
    .command(
      'verify',
      "check WAL objects against the metadata topic and, with --data-dir, the brokers' logs; exit 1 naming each problem",
      (y) =>
        timeOptions(
          kafkaOptions(
            storeOptions(y),
            'Kafka bootstrap servers (host:port, repeatable or comma-separated); required',
          ),
        )
          .option('data-dir', {
            type: 'string',
            array: true,
            describe: "a broker's log.dirs directory to compare batches with (repeatable)",
          })
          .option('footers-only', {
            type: 'boolean',
            describe:
              'check headers, trailers and footers by range reads instead of downloading every object',
            default: false,
          })
          .option('json', json),
      (argv) => run('wal verify', argv, runVerify),
    )
    .command(
      'gc',
      'delete WAL objects whose key creation time is older than --older-than (dry run unless --delete)',
      (y) =>
        storeOptions(y)
          .option('older-than', {
            type: 'string',
            describe: 'age of the objects to delete, by the creation time in their keys: 90m, 2h, 7d',
          })
          .option('delete', {
            type: 'boolean',
            describe:
              'really delete; without it only lists what would be deleted. Only this flag on the command line deletes: WALPROXY_DELETE is ignored',
            default: false,
          })
          .option('json', json),
      (argv) => run('wal gc', argv, (raw, ctx) => runGc(raw, ctx, args)),
    )
    .demandCommand(1, 'name a wal command: walproxy wal --help');
}

interface Context {
  command: string;
  store: ObjectStore;
  flags: StoreFlags;
  errors: FlagErrors;
  progress: Progress;
}

/** Parses the store flags and the command's own (all errors at once, exit 2), then runs it. */
async function run(
  command: string,
  raw: Raw,
  body: (raw: Raw, ctx: Context) => Promise<number>,
): Promise<void> {
  const errors = new FlagErrors();
  const flags = parseStoreFlags(raw, errors);
  let store: ObjectStore | undefined;
  if (flags) {
    try {
      store = openObjectStore(flags.url, flags.options);
    } catch (error) {
      errors.add('store-url', (error as Error).message);
    }
  }
  const progress = new Progress();
  const ctx = { command, store: store!, flags: flags!, errors, progress };
  try {
    process.exitCode = await body(raw, ctx);
  } catch (error) {
    progress.done();
    const message = (error as Error).message;
    const code = isObjectStoreError(error) ? ` (${error.code})` : '';
    process.stderr.write(`walproxy ${command}: ${message}${code}\n`);
    process.exitCode =
      isObjectStoreError(error) && error.code === 'WALPROXY_ERR_STORE_INVALID_ARGUMENT'
        ? EXIT_CONFIG_ERROR
        : EXIT_PROBLEMS;
  } finally {
    await store?.close().catch(() => undefined);
  }
}

function bootstrapList(raw: Raw, errors: FlagErrors, required: boolean): string[] | undefined {
  const values = ([] as unknown[]).concat(raw.bootstrap ?? []).flatMap((v) => String(v).split(','));
  const servers = values.map((s) => s.trim()).filter((s) => s !== '');
  if (servers.length === 0) {
    if (required) errors.add('bootstrap', 'is required (host:port of a broker or its sidecar)');
    return undefined;
  }
  for (const s of servers)
    if (!/^[^:\s]+:\d{1,5}$/.test(s)) errors.add('bootstrap', `'${s}' is not host:port`);
  return servers;
}

function timeRange(raw: Raw, errors: FlagErrors, nowMs: number): { sinceMs?: number; untilMs?: number } {
  return {
    sinceMs: flag(raw, 'since', errors, (t) => parseTime(t, nowMs)),
    untilMs: flag(raw, 'until', errors, (t) => parseTime(t, nowMs)),
  };
}

const iso = (ms: number) => new Date(ms).toISOString();
const num = (n: number) => n.toLocaleString('en-US');

async function runLs(raw: Raw, ctx: Context): Promise<number> {
  const range = timeRange(raw, ctx.errors, Date.now());
  exitOnFlagErrors(ctx.errors, ctx.command);
  const { objects, foreign } = await listWalObjects(ctx.store, ctx.flags.prefix, range, (n) =>
    ctx.progress.update(`listing: ${num(n)} keys`),
  );
  let done = 0;
  const rows = await mapLimit(objects, 8, async (o) => {
    let batches: number | undefined;
    let records: number | undefined;
    let partitions = '';
    let error: string | undefined;
    if (raw.footers !== false) {
      try {
        const index = await readObjectIndex(ctx.store, o.key, o.size);
        batches = index.entries.length;
        records = index.entries.reduce((t, e) => t + e.recordCount, 0);
        partitions = describePartitions(index.entries);
      } catch (e) {
        error = (e as Error).message;
      }
    }
    ctx.progress.update(`reading footers: ${num(++done)}/${num(objects.length)}`);
    return {
      key: o.key,
      size: o.size,
      createdAt: iso(o.createdAtMs),
      brokerId: o.brokerId,
      batches,
      records,
      partitions,
      error,
    };
  });
  ctx.progress.done();
  const totals = {
    objects: rows.length,
    bytes: rows.reduce((t, r) => t + r.size, 0),
    batches: rows.reduce((t, r) => t + (r.batches ?? 0), 0),
    records: rows.reduce((t, r) => t + (r.records ?? 0), 0),
    from: objects[0] ? iso(objects[0].createdAtMs) : null,
    to: objects.at(-1) ? iso(objects.at(-1)!.createdAtMs) : null,
    otherKeys: foreign.length,
  };
  if (raw.json) {
    process.stdout.write(`${JSON.stringify({ objects: rows, totals }, null, 2)}\n`);
    return 0;
  }
  let out = `${'created (UTC)'.padEnd(25)}${'broker'.padStart(6)}${'bytes'.padStart(12)}${'batches'.padStart(9)}  key  partitions\n`;
  for (const r of rows) {
    const detail = r.error !== undefined ? `UNREADABLE: ${r.error}` : r.partitions;
    out += `${r.createdAt.padEnd(25)}${String(r.brokerId).padStart(6)}${num(r.size).padStart(12)}${(r.batches === undefined ? '-' : num(r.batches)).padStart(9)}  ${r.key}  ${detail}\n`;
  }
  out += `${num(totals.objects)} objects, ${num(totals.bytes)} bytes`;
  if (raw.footers !== false) out += `, ${num(totals.batches)} batches, ${num(totals.records)} records`;
  if (totals.from) out += `; created ${totals.from} .. ${totals.to}`;
  if (totals.otherKeys > 0) out += `; ${num(totals.otherKeys)} other keys (not WAL objects) skipped`;
  process.stdout.write(`${out}\n`);
  return 0;
}

async function runInspect(raw: Raw, ctx: Context): Promise<number> {
  const bootstrap = bootstrapList(raw, ctx.errors, false);
  const key = String(raw.key ?? '');
  exitOnFlagErrors(ctx.errors, ctx.command);
  const head = await ctx.store.head(key);
  if (head === undefined) throw new Error(`no object ${JSON.stringify(key)} in ${ctx.store.url}`);
  const index = raw['check-batches']
    ? parseWalObject(await ctx.store.get(key))
    : await readObjectIndex(ctx.store, key, head.size);
  const offsets = new Map<number, { baseOffset: number; lastOffset: number }>();
  const strays: string[] = [];
  if (bootstrap) {
    const metadata = await readMetadataTopic(bootstrap, String(raw['metadata-topic']), (n, total) =>
      ctx.progress.update(`reading ${raw['metadata-topic']}: ${num(n)}/${num(total)}`),
    );
    ctx.progress.done();
    const positions = new Set(index.entries.map((e) => e.position));
    for (const record of metadata.records.filter((r) => r.object === key)) {
      for (const b of record.batches) {
        if (positions.has(b.position)) offsets.set(b.position, b);
        else strays.push(`${record.topic}-${record.partition} position ${b.position}: no batch starts there`);
      }
    }
  }
  const batches = index.entries.map((e, i) => ({
    index: i,
    topic: e.topicName,
    topicId: e.topicId,
    partition: e.partition,
    position: e.position,
    length: e.length,
    crc: e.crc,
    records: e.recordCount,
    producerId: e.producerId.toString(),
    producerEpoch: e.producerEpoch,
    baseSequence: e.baseSequence,
    lastOffsetDelta: e.lastOffsetDelta,
    ...(bootstrap ? { offsets: offsets.get(e.position) ?? null } : {}),
  }));
  if (raw.json) {
    process.stdout.write(
      `${JSON.stringify({ key, size: head.size, header: index.header, trailer: index.trailer, batches, strays }, null, 2)}\n`,
    );
    return 0;
  }
  const h = index.header;
  const t = index.trailer;
  let out = `object   ${key} (${num(head.size)} bytes)\n`;
  out += `header   format v${h.formatVersion}, writer broker ${h.writerBrokerId}, created ${iso(h.createdAtMs)} (${h.createdAtMs})\n`;
  out += `trailer  footer at ${t.footerPosition}, ${t.footerLength} bytes, CRC-32C ${t.footerCrc}\n`;
  out += `batches  ${batches.length}${raw['check-batches'] ? ' (every batch checked)' : ''}\n`;
  out += `${'#'.padStart(5)}  ${'topic-partition'.padEnd(28)}${'position'.padStart(10)}${'length'.padStart(9)}${'crc'.padStart(12)}${'records'.padStart(8)}  producer id/epoch/seq${bootstrap ? '  offsets (metadata)' : ''}\n`;
  for (const b of batches) {
    const tp = `${b.topic !== '' ? b.topic : `id:${b.topicId}`}-${b.partition}`;
    let line = `${String(b.index).padStart(5)}  ${tp.padEnd(28)}${String(b.position).padStart(10)}${String(b.length).padStart(9)}${String(b.crc).padStart(12)}${String(b.records).padStart(8)}  ${b.producerId}/${b.producerEpoch}/${b.baseSequence}`;
    if (bootstrap)
      line += `  ${b.offsets ? `${b.offsets.baseOffset}..${b.offsets.lastOffset}` : 'not indexed'}`;
    out += `${line}\n`;
  }
  for (const s of strays) out += `metadata record points at no batch: ${s}\n`;
  process.stdout.write(out);
  return strays.length > 0 ? EXIT_PROBLEMS : 0;
}

async function runVerify(raw: Raw, ctx: Context): Promise<number> {
  const bootstrap = bootstrapList(raw, ctx.errors, true);
  const range = timeRange(raw, ctx.errors, Date.now());
  const dataDirs = ([] as unknown[]).concat(raw['data-dir'] ?? []).map(String);
  const { existsSync } = await import('node:fs');
  for (const d of dataDirs) if (!existsSync(d)) ctx.errors.add('data-dir', `'${d}' does not exist`);
  exitOnFlagErrors(ctx.errors, ctx.command);
  const topic = String(raw['metadata-topic']);
  const metadata = await readMetadataTopic(bootstrap!, topic, (n, total) =>
    ctx.progress.update(`reading ${topic}: ${num(n)}/${num(total)}`),
  );
  const report = await verifyWal({
    store: ctx.store,
    prefix: ctx.flags.prefix,
    records: metadata.records,
    unreadableRecords: metadata.unreadable,
    ...range,
    footersOnly: raw['footers-only'] === true,
    brokerLogs: dataDirs.length > 0 ? new DataDirLogs(dataDirs) : undefined,
    onProgress: (n, total) => ctx.progress.update(`checking objects: ${num(n)}/${num(total)}`),
  });
  ctx.progress.done();
  if (raw.json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    let out = '';
    for (const f of report.findings) {
      out += `${INFO_KINDS.has(f.kind) ? 'info ' : 'ERROR'} ${f.kind} ${f.key}: ${f.message}\n`;
    }
    out += `${num(report.objects)} objects (${num(report.bytes)} bytes), ${num(report.records)} metadata records${dataDirs.length > 0 ? `, ${dataDirs.length} broker data dir(s)` : ''}: `;
    out += report.problems === 0 ? 'OK' : `${report.problems} problem(s)`;
    const info = report.findings.length - report.problems;
    if (info > 0) out += `, ${info} info`;
    process.stdout.write(`${out}\n`);
  }
  return report.problems === 0 ? 0 : EXIT_PROBLEMS;
}

/**
 * Whether `--delete` is on the command line itself. yargs also takes every flag from a WALPROXY_*
 * variable (cli.ts), and a variable left in an environment — a shell profile, a CI job, a pod
 * spec copied from another — must not turn a dry run into deletion: destructive tools act only on
 * what the operator typed.
 */
export function deleteRequested(args: readonly string[]): boolean {
  return Parser([...args], { boolean: ['delete'] }).delete === true;
}

async function runGc(raw: Raw, ctx: Context, args: readonly string[]): Promise<number> {
  const olderThanMs = flag(raw, 'older-than', ctx.errors, parseDuration);
  if (!present(raw['older-than'])) ctx.errors.add('older-than', 'is required (a duration: 90m, 2h, 7d)');
  exitOnFlagErrors(ctx.errors, ctx.command);
  if (process.env.WALPROXY_DELETE !== undefined) {
    process.stderr.write(
      `walproxy ${ctx.command}: WALPROXY_DELETE is ignored: only --delete on the command line deletes\n`,
    );
  }
  const doDelete = deleteRequested(args);
  const nowMs = Date.now();
  const { objects } = await listWalObjects(ctx.store, ctx.flags.prefix, {}, (n) =>
    ctx.progress.update(`listing: ${num(n)} keys`),
  );
  const selected = selectForGc(objects, olderThanMs!, nowMs);
  const bytes = selected.reduce((t, o) => t + o.size, 0);
  if (doDelete) {
    await deleteObjects(
      ctx.store,
      selected.map((o) => o.key),
      (n) => ctx.progress.update(`deleting: ${num(n)}/${num(selected.length)}`),
    );
  }
  ctx.progress.done();
  const cutoff = iso(nowMs - olderThanMs!);
  if (raw.json) {
    process.stdout.write(
      `${JSON.stringify({ deleted: doDelete, cutoff, objects: selected.map((o) => ({ key: o.key, size: o.size, createdAt: iso(o.createdAtMs) })), kept: objects.length - selected.length }, null, 2)}\n`,
    );
    return 0;
  }
  let out = '';
  for (const o of selected)
    out += `${doDelete ? 'deleted' : 'would delete'} ${o.key} (${num(o.size)} bytes, created ${iso(o.createdAtMs)})\n`;
  out += `${doDelete ? 'deleted' : 'would delete'} ${num(selected.length)} objects (${num(bytes)} bytes) created before ${cutoff}; kept ${num(objects.length - selected.length)}`;
  if (!doDelete && selected.length > 0) out += '; run again with --delete to delete them';
  process.stdout.write(`${out}\n`);
  return 0;
}
