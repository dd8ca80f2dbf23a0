import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkImports, MAX_LINES } from './check-imports.mjs';

const NONE = { imports: [], circles: [], lines: [] };
const roots = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** A tiny repository: `files` maps a path to its text. */
function tree(files) {
  const root = mkdtempSync(path.join(os.tmpdir(), 'check-imports-'));
  roots.push(root);
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), text);
  }
  return root;
}

/** A layout that keeps every rule: each fixture below breaks one on top of it. */
const CLEAN = {
  'shared/src/index.ts': "export * from './codec.js';\n",
  'shared/src/codec.ts': 'export const codec = 1;\n',
  'proxy/src/index.ts': "export { codec } from '@walproxy/shared';\n",
  'proxy/src/config/flags.ts': "import type { Argv } from 'yargs';\nexport type A = Argv;\n",
  'proxy/src/wal/writer.ts': "import { codec } from '@walproxy/shared';\nexport const w = codec;\n",
  'proxy/src/cli/main.ts':
    "import yargs from 'yargs';\nimport { w } from '../wal/writer.js';\nimport '../config/flags.js';\nexport const m = [yargs, w];\n",
  'e2e/src/harness.ts': "import { m } from '../../proxy/src/cli/main.js';\nexport const h = m;\n",
  'proxy/test/cli/main.test.ts': "import { m } from '../../src/cli/main.js';\nexport const t = m;\n",
};

describe('check-imports', () => {
  it('passes a tree that keeps every rule', () => {
    expect(checkImports(tree(CLEAN), NONE)).toEqual([]);
  });

  it('fails shared/ importing proxy/, by path or by package name', () => {
    const root = tree({
      ...CLEAN,
      'shared/src/codec.ts': "import { w } from '../../proxy/src/wal/writer.js';\nexport const codec = w;\n",
      'shared/test/codec.test.ts': "import { m } from '@walproxy/proxy';\nexport const t = m;\n",
    });
    expect(checkImports(root, NONE)).toEqual([
      'shared/src/codec.ts imports proxy/src/wal/writer.ts: shared/ is below proxy/src/: a lower floor never imports a higher one',
      'shared/test/codec.test.ts imports proxy/src/index.ts: shared/ is below proxy/src/: a lower floor never imports a higher one',
      // the first import also closes a circle: shared/src/codec.ts -> writer.ts -> index.ts -> codec.ts
      'import circle between proxy/src/wal/writer.ts, shared/src/codec.ts, shared/src/index.ts',
    ]);
  });

  it('fails a file of proxy/src outside cli/ importing cli/, by import, re-export or import()', () => {
    const root = tree({
      ...CLEAN,
      'proxy/src/config/flags.ts': "export * from '../cli/main.js';\n",
      'proxy/src/wal/writer.ts':
        "export const w = 1;\nexport const later = () => import('../cli/main.js');\n",
    });
    const problems = checkImports(root, NONE);
    expect(problems).toContain(
      'proxy/src/config/flags.ts imports proxy/src/cli/main.ts: proxy/src/ is below proxy/src/cli/: a lower floor never imports a higher one',
    );
    expect(problems).toContain(
      'proxy/src/wal/writer.ts imports proxy/src/cli/main.ts: proxy/src/ is below proxy/src/cli/: a lower floor never imports a higher one',
    );
  });

  it('fails yargs imported outside cli/ and config/, type-only imports and subpaths included', () => {
    const root = tree({
      ...CLEAN,
      'proxy/src/store/options.ts': "import type { Argv } from 'yargs';\nexport type O = Argv;\n",
      'shared/src/codec.ts': "import { hideBin } from 'yargs/helpers';\nexport const codec = hideBin;\n",
    });
    expect(checkImports(root, NONE)).toEqual([
      'proxy/src/store/options.ts imports yargs: yargs is imported only in proxy/src/cli/ and proxy/src/config/',
      'shared/src/codec.ts imports yargs: yargs is imported only in proxy/src/cli/ and proxy/src/config/',
    ]);
  });

  it('fails a circle between files, type-only imports included', () => {
    const root = tree({
      ...CLEAN,
      'proxy/src/zone/a.ts': "import type { B } from './b.js';\nexport type A = B | 1;\n",
      'proxy/src/zone/b.ts': "import { c } from './c.js';\nexport type B = 2;\nexport const b = c;\n",
      'proxy/src/zone/c.ts': "import type { A } from './a.js';\nexport const c: A = 1;\n",
    });
    expect(checkImports(root, NONE)).toEqual([
      'import circle between proxy/src/zone/a.ts, proxy/src/zone/b.ts, proxy/src/zone/c.ts',
    ]);
  });

  it(`fails a source file over ${MAX_LINES} lines, not one of ${MAX_LINES}, not a test`, () => {
    const lines = (n) => 'export const x = 1;\n'.repeat(n);
    const root = tree({
      ...CLEAN,
      'proxy/src/wal/writer.ts': lines(MAX_LINES + 1),
      'proxy/src/wal/reader.ts': lines(MAX_LINES),
      'proxy/test/wal/writer.test.ts': lines(MAX_LINES + 100),
    });
    expect(checkImports(root, NONE)).toEqual([
      `proxy/src/wal/writer.ts has ${MAX_LINES + 1} lines, over ${MAX_LINES}: split it along its concerns`,
    ]);
  });

  it('lets an allow-listed violation through and fails an entry that matches nothing', () => {
    const root = tree({
      ...CLEAN,
      'proxy/src/wal/writer.ts': "import type { Argv } from 'yargs';\nexport type W = Argv;\n",
    });
    const allow = {
      imports: [
        { from: 'proxy/src/wal/writer.ts', to: 'yargs', reason: 'test' },
        { from: 'proxy/src/index.ts', to: 'proxy/src/cli/main.ts', reason: 'test' },
      ],
      circles: [{ files: ['proxy/src/a.ts', 'proxy/src/b.ts'], reason: 'test' }],
      lines: [{ file: 'proxy/src/wal/writer.ts', reason: 'test' }],
    };
    expect(checkImports(root, allow)).toEqual([
      'allow-list: proxy/src/index.ts no longer imports proxy/src/cli/main.ts; remove the entry',
      'allow-list: the circle proxy/src/a.ts, proxy/src/b.ts is gone or changed; remove or update the entry',
      `allow-list: proxy/src/wal/writer.ts is no longer over ${MAX_LINES} lines; remove the entry`,
    ]);
  });
});
