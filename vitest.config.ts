import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Tests import the workspaces' TypeScript sources directly, so `make test-unit` needs no build.
// e2e tests spawn the built sidecar binary (proxy/dist), which `make e2e` builds first.
const alias = {
  '@walproxy/shared': fileURLToPath(new URL('./shared/src/index.ts', import.meta.url)),
  '@walproxy/proxy': fileURLToPath(new URL('./proxy/src/index.ts', import.meta.url)),
};

export default defineConfig({
  resolve: { alias },
  test: {
    projects: [
      {
        resolve: { alias },
        test: {
          name: 'unit',
          include: [
            'shared/test/**/*.test.ts',
            'proxy/test/**/*.test.ts',
            'deploy/test/**/*.test.ts',
            // pure code of the benchmarks (the charts renderer)
            'e2e/bench/**/*.test.ts',
            // pure harness code (no cluster)
            'e2e/src/**/*.test.ts',
            // the repository's own checks (the import check of `make lint`)
            'scripts/**/*.test.mjs',
          ],
          testTimeout: 30_000,
        },
      },
      {
        resolve: { alias },
        test: {
          name: 'e2e',
          include: ['e2e/test/**/*.test.ts'],
          // One real cluster is shared by every e2e file (globalSetup starts it once); files run
          // one after another because two cores cannot carry parallel load on one cluster.
          globalSetup: ['e2e/test/global-setup.ts'],
          fileParallelism: false,
          testTimeout: 300_000,
          hookTimeout: 300_000,
        },
      },
    ],
  },
});
