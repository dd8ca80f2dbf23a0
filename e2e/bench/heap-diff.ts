/**
 * What grew between two V8 heap snapshots of one process (the memory soak writes them with
 * SOAK_PROBE_SNAPSHOT_AT_S): node ids are stable within a process, so the objects in the later
 * snapshot whose ids the earlier one lacks were allocated in between and are still alive. Prints
 * them grouped by type and name (ArrayBuffer backing stores included, as "native" nodes with their
 * sizes), each group with its commonest retainers (the objects holding an edge to them), and the
 * totals of both snapshots by group for comparison. A diagnosis aid; asserts nothing.
 *
 * Run: node --max-old-space-size=6000 --import tsx e2e/bench/heap-diff.ts A.heapsnapshot B.heapsnapshot [top=25]
 */
import { readFileSync } from 'node:fs';

interface Snapshot {
  snapshot: {
    meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] };
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

interface Parsed {
  count: number;
  type: (i: number) => string;
  name: (i: number) => string;
  id: (i: number) => number;
  size: (i: number) => number;
  /** For each node, the nodes that hold an edge to it (weak edges excluded). */
  retainers: () => number[][];
}

function parse(file: string): Parsed {
  const s = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const nf = s.snapshot.meta.node_fields;
  const ef = s.snapshot.meta.edge_fields;
  const width = nf.length;
  const [iType, iName, iId, iSize, iEdges] = ['type', 'name', 'id', 'self_size', 'edge_count'].map((f) =>
    nf.indexOf(f),
  ) as [number, number, number, number, number];
  const eWidth = ef.length;
  const [eType, eTo] = ['type', 'to_node'].map((f) => ef.indexOf(f)) as [number, number];
  const types = s.snapshot.meta.node_types[0];
  const edgeTypes = s.snapshot.meta.edge_types[0];
  const weak = edgeTypes.indexOf('weak');
  const count = s.nodes.length / width;
  return {
    count,
    type: (i) => types[s.nodes[i * width + iType]!]!,
    name: (i) => s.strings[s.nodes[i * width + iName]!]!,
    id: (i) => s.nodes[i * width + iId]!,
    size: (i) => s.nodes[i * width + iSize]!,
    retainers: () => {
      const result: number[][] = Array.from({ length: count }, () => []);
      let edge = 0;
      for (let n = 0; n < count; n++) {
        const edges = s.nodes[n * width + iEdges]!;
        for (let k = 0; k < edges; k++, edge += eWidth) {
          if (s.edges[edge + eType] === weak) continue;
          const to = s.edges[edge + eTo]! / width;
          const list = result[to]!;
          if (list.length < 4) list.push(n);
        }
      }
      return result;
    },
  };
}

function group(p: Parsed, i: number): string {
  const name = p.name(i);
  // Strings and numbers by type only; everything else by type and constructor or native name.
  if (['string', 'concatenated string', 'sliced string', 'number', 'hidden', 'code'].includes(p.type(i)))
    return p.type(i);
  return `${p.type(i)}:${name.length > 60 ? `${name.slice(0, 60)}…` : name}`;
}

const [fileA, fileB, topRaw] = process.argv.slice(2);
if (!fileA || !fileB) throw new Error('usage: heap-diff.ts A.heapsnapshot B.heapsnapshot [top]');
const top = Number(topRaw ?? 25);
const a = parse(fileA);
const ids = new Set<number>();
const totalsA = new Map<string, { count: number; bytes: number }>();
for (let i = 0; i < a.count; i++) {
  ids.add(a.id(i));
  const g = group(a, i);
  const t = totalsA.get(g) ?? { count: 0, bytes: 0 };
  t.count++;
  t.bytes += a.size(i);
  totalsA.set(g, t);
}
const b = parse(fileB);
const retainers = b.retainers();
const fresh = new Map<string, { count: number; bytes: number; by: Map<string, number> }>();
const totalsB = new Map<string, { count: number; bytes: number }>();
for (let i = 0; i < b.count; i++) {
  const g = group(b, i);
  const t = totalsB.get(g) ?? { count: 0, bytes: 0 };
  t.count++;
  t.bytes += b.size(i);
  totalsB.set(g, t);
  if (ids.has(b.id(i))) continue;
  const f = fresh.get(g) ?? { count: 0, bytes: 0, by: new Map<string, number>() };
  f.count++;
  f.bytes += b.size(i);
  for (const r of retainers[i]!) f.by.set(group(b, r), (f.by.get(group(b, r)) ?? 0) + 1);
  fresh.set(g, f);
}
const mb = (n: number) => (n / 1_048_576).toFixed(2);
console.log(`objects alive in B that A did not have, by group (top ${top} by bytes):`);
for (const [g, f] of [...fresh].sort((x, y) => y[1].bytes - x[1].bytes).slice(0, top)) {
  const by = [...f.by]
    .sort((x, y) => y[1] - x[1])
    .slice(0, 4)
    .map(([r, n]) => `${r} ×${n}`)
    .join(', ');
  console.log(`  ${mb(f.bytes)} MB  ${f.count}  ${g}    held by: ${by}`);
}
console.log(`\ngroups whose total grew most from A to B (top ${top}):`);
const growth = [...totalsB].map(([g, t]) => {
  const before = totalsA.get(g) ?? { count: 0, bytes: 0 };
  return { g, bytes: t.bytes - before.bytes, count: t.count - before.count, total: t.bytes };
});
for (const d of growth.sort((x, y) => y.bytes - x.bytes).slice(0, top))
  console.log(`  +${mb(d.bytes)} MB  +${d.count}  ${d.g}  (now ${mb(d.total)} MB)`);
console.log(`\nlargest groups in B (top ${top}):`);
for (const [g, t] of [...totalsB].sort((x, y) => y[1].bytes - x[1].bytes).slice(0, top))
  console.log(`  ${mb(t.bytes)} MB  ${t.count}  ${g}`);
const sum = (m: Map<string, { bytes: number }>) => [...m.values()].reduce((n, t) => n + t.bytes, 0);
console.log(`\ntotal: A ${mb(sum(totalsA))} MB, B ${mb(sum(totalsB))} MB`);
