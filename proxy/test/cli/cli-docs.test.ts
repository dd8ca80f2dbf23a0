import { readFileSync } from 'node:fs';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { AdminServer } from '../../src/admin/admin-server.js';
import { CLI_DOCS_PATH, DOCUMENTED_COMMANDS, helpText, renderCliDocs } from '../../src/cli/gen-docs.js';
import { createLogger } from '../../src/log.js';

describe('docs/cli.md', () => {
  it("matches every command's --help as the yargs definitions print it (regenerate: make docs)", async () => {
    expect(readFileSync(CLI_DOCS_PATH, 'utf8')).toBe(await renderCliDocs());
  });

  it('gives every flag of every command a description', async () => {
    for (const command of DOCUMENTED_COMMANDS) {
      const help = await helpText(command);
      for (const line of help.split('\n')) {
        // A flag line with nothing between the flag and its type column has no help text
        expect(line, `walproxy ${command.join(' ')}`).not.toMatch(
          /^\s+--[a-z0-9-]+\s+\[(string|boolean|array)\]/,
        );
      }
    }
  });

  it("names in --admin-listen's help every path the admin server answers", async () => {
    // Given an admin server with every route a sidecar gives it
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as net.AddressInfo;
    await new Promise((resolve) => probe.close(resolve));
    const server = new AdminServer(
      { host: '127.0.0.1', port },
      {
        counters: () => ({}),
        healthy: () => true,
        ready: async () => ({ ready: true, upstream: { ok: true } }),
        metrics: async () => '',
      },
      createLogger('silent'),
    );
    await server.start();
    const served: string[] = [];
    try {
      for (const path of ['/healthz', '/readyz', '/metrics', '/counters', '/', '/status', '/debug']) {
        if ((await fetch(`http://127.0.0.1:${port}${path}`)).status !== 404) served.push(path);
      }
    } finally {
      await server.stop();
    }
    expect(served).toEqual(['/healthz', '/readyz', '/metrics', '/counters']);
    // Then the help of the flag that opens it names each
    const help = await helpText(['sidecar']);
    const block = /^ {2}--admin-listen[\s\S]*?(?=^ {2}--)/m.exec(help)![0];
    for (const path of served) expect(block.replace(/\s+/g, ' '), path).toContain(`${path} (`);
  });
});
