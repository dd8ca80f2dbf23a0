#!/usr/bin/env node
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { EXIT_CONFIG_ERROR, runSidecar, sidecarOptions } from './sidecar-command.js';

// The AWS SDK warns on every start under Node 20 that its 2027 releases will need Node 22. The
// pinned SDK works on 20 and the container image runs a current LTS; keep stderr for errors an
// operator must act on.
const emitWarning = process.emitWarning.bind(process);
process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
  const text = `${typeof warning === 'string' ? warning : warning.name} ${rest.map(String).join(' ')}`;
  if (text.includes('NodeVersionSupportWarning')) return;
  (emitWarning as (...args: unknown[]) => void)(warning, ...rest);
}) as typeof process.emitWarning;

await yargs(hideBin(process.argv))
  .scriptName('walproxy')
  .env('WALPROXY')
  .command('sidecar', 'run the sidecar next to one Kafka broker', sidecarOptions, (argv) => runSidecar(argv))
  .demandCommand(1, 'name a command: walproxy sidecar --help')
  .strict()
  .fail((message, error) => {
    // One clear line instead of yargs' help dump; exit 2 marks a configuration error.
    process.stderr.write(`walproxy: ${message ?? error?.message}\n`);
    process.exit(EXIT_CONFIG_ERROR);
  })
  .help()
  .parseAsync();
