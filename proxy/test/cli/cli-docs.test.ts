import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CLI_DOCS_PATH, DOCUMENTED_COMMANDS, helpText, renderCliDocs } from '../../src/cli/gen-docs.js';

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
});
