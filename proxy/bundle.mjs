// Bundles the walproxy CLI into dist/cli/walproxy.mjs (plus the chunks it loads later, in
// dist/cli/chunks/), which the container image, the Helm chart and the e2e harness run. Why: a
// sidecar's start is on a broker's critical path (a restart's clients wait for it), and most of it
// was Node resolving and reading the thousands of files of its dependencies (the AWS SDK alone
// ~900 ms on the loaded test machine): one file starts ~35 % faster (docs/benchmarks.md, "Sidecar
// start"). Code splitting: what the code imports with import() — the AWS SDK, kafkajs,
// OpenTelemetry's SDK — goes to chunks that are read and evaluated only when first used, after the
// listeners opened; test/cli/bundle.test.ts keeps them out of the entry chunk. dist/cli/main.js
// stays the same program, unbundled (the package's bin). The one native addon, @node-rs/crc32,
// stays external: it is resolved from node_modules at run time, through the require() the banner
// provides.
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const here = (relative) => fileURLToPath(new URL(relative, import.meta.url));

/**
 * Packages whose module body does costly work at load that only `--help` needs: string-width
 * (both copies, yargs' and cliui's) builds an Intl.Segmenter and a \p{RGI_Emoji} RegExp when it
 * is evaluated, ~25 ms of CPU on an idle start and several times that on a busy node, before the
 * listeners open (issue #12: ready within 2 s). Each importer gets a stand-in with the same
 * default export that evaluates the real module on its first call; the real one stays in the
 * bundle, wrapped by esbuild in a lazy initializer because it is require()d. (A package whose
 * exports are not just a default function cannot be deferred this way.)
 */
const DEFERRED_DEFAULT_EXPORTS = ['string-width'];

const deferEvaluation = {
  name: 'defer-evaluation',
  setup(build) {
    const filter = new RegExp(`^(${DEFERRED_DEFAULT_EXPORTS.join('|')})$`);
    build.onResolve({ filter }, async (args) => {
      if (args.pluginData?.deferred) return undefined; // the stand-in's own require(): the real module
      const real = await build.resolve(args.path, {
        kind: args.kind,
        importer: args.importer,
        resolveDir: args.resolveDir,
        pluginData: { deferred: true },
      });
      if (real.errors.length > 0) return { errors: real.errors };
      return {
        path: real.path,
        namespace: 'deferred',
        pluginData: { specifier: args.path, resolveDir: args.resolveDir },
      };
    });
    build.onLoad({ filter: /.*/, namespace: 'deferred' }, (args) => ({
      resolveDir: args.pluginData.resolveDir,
      contents:
        `let real;\n` +
        `export default function deferred(...args) {\n` +
        `  real ??= require(${JSON.stringify(args.pluginData.specifier)}).default;\n` +
        `  return real(...args);\n` +
        `}\n`,
      pluginData: { deferred: true },
    }));
  },
};

/** The esbuild options, shared with the test that checks what the entry chunk holds. */
export const BUNDLE_OPTIONS = {
  entryPoints: { walproxy: here('./dist/cli/main.js') },
  outdir: here('./dist/cli'),
  entryNames: '[name]',
  chunkNames: 'chunks/[name]-[hash]',
  outExtension: { '.js': '.mjs' },
  bundle: true,
  splitting: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  external: ['@node-rs/crc32'],
  // Bundled CommonJS dependencies call require(); an ES module has none of its own. Every chunk
  // gets the banner, so a lazily loaded CommonJS dependency finds it too.
  banner: {
    js: "import { createRequire as walproxyCreateRequire } from 'node:module'; const require = walproxyCreateRequire(import.meta.url);",
  },
  logLevel: 'warning',
  plugins: [deferEvaluation],
};

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // Chunk names carry a content hash: drop the previous build's.
  rmSync(here('./dist/cli/chunks'), { recursive: true, force: true });
  await build(BUNDLE_OPTIONS);
}
