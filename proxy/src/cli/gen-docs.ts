// Renders docs/cli.md from the yargs definitions: every command's --help, exactly as printed.
//   node proxy/dist/cli/gen-docs.js            writes docs/cli.md
//   node proxy/dist/cli/gen-docs.js --check    exits 1 when docs/cli.md differs
// proxy/test/cli/cli-docs.test.ts fails when the committed file drifts from the definitions.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildCli } from './cli.js';

/** Every command, in the order docs/cli.md lists them. */
export const DOCUMENTED_COMMANDS: readonly string[][] = [
  [],
  ['sidecar'],
  ['wal'],
  ['wal', 'ls'],
  ['wal', 'inspect'],
  ['wal', 'verify'],
  ['wal', 'gc'],
  ['cost'],
  ['version'],
];

export const CLI_DOCS_PATH = fileURLToPath(new URL('../../../docs/cli.md', import.meta.url));

/** The --help text of one command, captured instead of printed. */
export async function helpText(command: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    void buildCli([...command, '--help']).parseAsync([...command, '--help'], {}, (error, _argv, output) => {
      if (error) reject(error);
      else resolve(output);
    });
  });
}

export async function renderCliDocs(): Promise<string> {
  let out = '# walproxy command line\n\n';
  out +=
    '<!-- Generated from the yargs definitions by proxy/src/cli/gen-docs.ts (`make docs`); do not edit. -->\n\n';
  out +=
    'Every flag can also be set by an environment variable: `WALPROXY_` + the flag in upper snake case ' +
    '(`--store-url` → `WALPROXY_STORE_URL`); a flag on the command line wins. `wal gc --delete` is the one ' +
    'exception: only the flag on the command line deletes, `WALPROXY_DELETE` is ignored (with a warning). ' +
    'True/false flags: a bare `--flag` is true, `--flag=false`, `--flag false` or `--no-flag` false, any other ' +
    'value an error. Bad values are reported one ' +
    'line per setting, naming the flag, with exit code 2. Settings and defaults of the sidecar: ' +
    '[configuration.md](configuration.md); the cost model: [cost.md](cost.md).\n';
  for (const command of DOCUMENTED_COMMANDS) {
    const name = ['walproxy', ...command].join(' ');
    out += `\n## \`${name}\`\n\n\`\`\`text\n${(await helpText(command)).trimEnd()}\n\`\`\`\n`;
  }
  return out;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const docs = await renderCliDocs();
  if (process.argv.includes('--check')) {
    const current = readFileSync(CLI_DOCS_PATH, 'utf8');
    if (current !== docs) {
      process.stderr.write(`${CLI_DOCS_PATH} is out of date: run make docs\n`);
      process.exit(1);
    }
  } else {
    writeFileSync(CLI_DOCS_PATH, docs);
    process.stdout.write(`wrote ${CLI_DOCS_PATH}\n`);
  }
}
