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
};

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // Chunk names carry a content hash: drop the previous build's.
  rmSync(here('./dist/cli/chunks'), { recursive: true, force: true });
  await build(BUNDLE_OPTIONS);
}
