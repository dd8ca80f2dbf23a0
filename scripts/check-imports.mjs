// The import check of `make lint` (issue #25): the floors of the house, read from the sources.
//
//   floors, lowest first: shared/ (the wire layer) < proxy/src (the runtime) < proxy/src/cli (the
//   command trees) < e2e/ (the harness). A file imports only from its own floor or a lower one:
//   shared/ never imports proxy/, nothing in proxy/src outside cli/ imports cli/.
//   yargs is the command line's: imported only in proxy/src/cli/ and proxy/src/config/ (the flag
//   declarations and their parsers), never by the runtime or by shared/.
//   no circle of imports between files (shared/src, proxy/src, e2e/src): a circle is one module in
//   several files, none of which can be read or changed alone. `import type` counts: the reader
//   follows it the same way.
//   no source file (shared/src, proxy/src, e2e/src, scripts) over MAX_LINES lines.
//
// Why a script and not dependency-cruiser: the rules are four, specific to this layout, and fit in
// this file with the TypeScript parser the repository already pins (`typescript`), so the check
// needs no new dependency and no configuration language of its own. Every exception is in
// scripts/import-allow-list.mjs with its reason; an entry that no longer matches a violation fails
// the check too, so the list only shrinks as the house is fixed.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

export const MAX_LINES = 600;

/** Folders (relative to the root) whose .ts/.mts/.mjs files are read. */
const SCANNED = ['shared', 'proxy/src', 'proxy/test', 'proxy/bench', 'e2e', 'deploy', 'scripts'];
const SKIPPED_DIRS = new Set(['node_modules', 'dist', '.runs', '.cache']);
/** Where a circle or a long file is looked for: the sources, not tests (a test file is a list of cases). */
const SOURCE_DIRS = ['shared/src/', 'proxy/src/', 'e2e/src/', 'scripts/'];
/** The workspace packages, by the file their name resolves to (vitest.config.ts aliases them the same way). */
const PACKAGES = { '@walproxy/shared': 'shared/src/index.ts', '@walproxy/proxy': 'proxy/src/index.ts' };

/** The floor of a file (higher = nearer the operator), or undefined for a file no floor rule covers. */
function floorOf(file) {
  if (file.startsWith('shared/')) return { level: 0, name: 'shared/' };
  if (file.startsWith('proxy/src/cli/')) return { level: 2, name: 'proxy/src/cli/' };
  if (file.startsWith('proxy/src/')) return { level: 1, name: 'proxy/src/' };
  if (file.startsWith('e2e/')) return { level: 3, name: 'e2e/' };
  return undefined;
}

/** yargs belongs to the command line: cli/ declares the commands, config/ the flags it parses. */
function mayImportYargs(file) {
  if (file.startsWith('proxy/src/cli/') || file.startsWith('proxy/src/config/')) return true;
  return !(file.startsWith('shared/') || file.startsWith('proxy/src/'));
}

function listFiles(root) {
  const files = [];
  const walk = (relative) => {
    const absolute = path.join(root, relative);
    let entries;
    try {
      entries = readdirSync(absolute, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const child = path.posix.join(relative, entry.name);
      if (entry.isDirectory()) {
        if (!SKIPPED_DIRS.has(entry.name)) walk(child);
      } else if (/\.(ts|mts|mjs)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) {
        files.push(child);
      }
    }
  };
  for (const dir of SCANNED) walk(dir);
  return files.sort();
}

/** Every module specifier a file names: static imports, re-exports, import() and import('x') types. */
function specifiersOf(file, text) {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false);
  const found = [];
  const visit = (node) => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      found.push(node.moduleSpecifier.text);
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteralLike(node.arguments[0])
    ) {
      found.push(node.arguments[0].text);
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      found.push(node.argument.literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The repository file a specifier names (relative to the root), or undefined for a package. */
function resolve(from, specifier, known) {
  if (specifier in PACKAGES) return PACKAGES[specifier];
  if (!specifier.startsWith('.')) return undefined;
  const target = path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier));
  const stem = target.replace(/\.(js|mjs|ts|mts)$/, '');
  for (const candidate of [target, `${stem}.ts`, `${stem}.mts`, `${stem}.mjs`, `${stem}/index.ts`]) {
    if (known.has(candidate)) return candidate;
  }
  // A file outside the scanned folders (e.g. proxy/bundle.mjs) or missing: still on its path's floor.
  return target;
}

function packageOf(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/** Circles: the strongly connected components of more than one file (Tarjan), each sorted. */
function circles(graph) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const found = [];
  let next = 0;
  const connect = (file) => {
    index.set(file, next);
    low.set(file, next);
    next++;
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file) ?? []) {
      if (!index.has(target)) {
        connect(target);
        low.set(file, Math.min(low.get(file), low.get(target)));
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file), index.get(target)));
      }
    }
    if (low.get(file) === index.get(file)) {
      const component = [];
      let member;
      do {
        member = stack.pop();
        onStack.delete(member);
        component.push(member);
      } while (member !== file);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const file of [...graph.keys()].sort()) if (!index.has(file)) connect(file);
  return found;
}

/**
 * Reads the tree under `root` and returns every violation not in `allow`, plus every entry of
 * `allow` that matches none (stale). `allow`: { imports: [{ from, to, reason }], circles:
 * [{ files, reason }], lines: [{ file, reason }] }.
 */
export function checkImports(root, allow = { imports: [], circles: [], lines: [] }) {
  const files = listFiles(root);
  const known = new Set(files);
  const problems = [];
  const importViolations = [];
  const graph = new Map();
  const longFiles = [];
  const isSource = (file) => SOURCE_DIRS.some((dir) => file.startsWith(dir));

  for (const file of files) {
    const text = readFileSync(path.join(root, file), 'utf8');
    const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
    if (isSource(file) && lines > MAX_LINES) longFiles.push({ file, lines });
    const edges = new Set();
    for (const specifier of specifiersOf(file, text)) {
      const target = resolve(file, specifier, known);
      if (target === undefined) {
        if (packageOf(specifier) === 'yargs' && !mayImportYargs(file)) {
          importViolations.push({
            from: file,
            to: 'yargs',
            why: 'yargs is imported only in proxy/src/cli/ and proxy/src/config/',
          });
        }
        continue;
      }
      const floor = floorOf(file);
      const targetFloor = floorOf(target);
      if (floor && targetFloor && targetFloor.level > floor.level) {
        importViolations.push({
          from: file,
          to: target,
          why: `${floor.name} is below ${targetFloor.name}: a lower floor never imports a higher one`,
        });
      }
      if (isSource(file) && isSource(target) && target !== file) edges.add(target);
    }
    if (isSource(file)) graph.set(file, edges);
  }

  const used = { imports: new Set(), circles: new Set(), lines: new Set() };
  for (const v of importViolations) {
    const entry = allow.imports.findIndex((a) => a.from === v.from && a.to === v.to);
    if (entry >= 0) used.imports.add(entry);
    else problems.push(`${v.from} imports ${v.to}: ${v.why}`);
  }
  for (const component of circles(graph)) {
    const key = component.join(' ');
    const entry = allow.circles.findIndex((a) => [...a.files].sort().join(' ') === key);
    if (entry >= 0) used.circles.add(entry);
    else problems.push(`import circle between ${component.join(', ')}`);
  }
  for (const { file, lines } of longFiles) {
    const entry = allow.lines.findIndex((a) => a.file === file);
    if (entry >= 0) used.lines.add(entry);
    else problems.push(`${file} has ${lines} lines, over ${MAX_LINES}: split it along its concerns`);
  }
  allow.imports.forEach((a, i) => {
    if (!used.imports.has(i))
      problems.push(`allow-list: ${a.from} no longer imports ${a.to}; remove the entry`);
  });
  allow.circles.forEach((a, i) => {
    if (!used.circles.has(i))
      problems.push(
        `allow-list: the circle ${a.files.join(', ')} is gone or changed; remove or update the entry`,
      );
  });
  allow.lines.forEach((a, i) => {
    if (!used.lines.has(i))
      problems.push(`allow-list: ${a.file} is no longer over ${MAX_LINES} lines; remove the entry`);
  });
  return problems;
}

if (process.argv[1] && pathToFileURL(process.argv[1]).href === import.meta.url) {
  const root = path.resolve(fileURLToPath(new URL('..', import.meta.url)));
  const { ALLOW } = await import('./import-allow-list.mjs');
  const problems = checkImports(root, ALLOW);
  for (const problem of problems) process.stderr.write(`check-imports: ${problem}\n`);
  if (problems.length > 0) process.exit(1);
}
