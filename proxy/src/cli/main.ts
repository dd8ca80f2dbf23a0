#!/usr/bin/env node
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { EXIT_CONFIG_ERROR, runSidecar, sidecarOptions } from './sidecar-command.js';

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
