// Bundles the walproxy CLI into one ES module, dist/cli/walproxy.mjs, which the container image,
// the Helm chart and the e2e harness run. Why: a sidecar's start is on a broker's critical path
// (a restart's clients wait for it), and most of it was Node resolving and reading the thousands
// of files of its dependencies (the AWS SDK alone ~900 ms on the loaded test machine): one file
// starts ~35 % faster (docs/benchmarks.md, "Sidecar start"). dist/cli/main.js stays the same
// program, unbundled (the package's bin). The one native addon, @node-rs/crc32, stays external:
// it is resolved from node_modules at run time, through the require() the banner provides.
import { build } from 'esbuild';

await build({
  entryPoints: [new URL('./dist/cli/main.js', import.meta.url).pathname],
  outfile: new URL('./dist/cli/walproxy.mjs', import.meta.url).pathname,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  external: ['@node-rs/crc32'],
  // Bundled CommonJS dependencies call require(); an ES module has none of its own.
  banner: {
    js: "import { createRequire as walproxyCreateRequire } from 'node:module'; const require = walproxyCreateRequire(import.meta.url);",
  },
  logLevel: 'warning',
});
