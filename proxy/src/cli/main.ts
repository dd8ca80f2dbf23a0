#!/usr/bin/env node
import { hideBin } from 'yargs/helpers';
import { runCli } from './cli.js';

// The AWS SDK warns on every start under Node 20 that its 2027 releases will need Node 22. The
// pinned SDK works on 20 and the container image runs a current LTS; keep stderr for errors an
// operator must act on.
const emitWarning = process.emitWarning.bind(process);
process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
  const text = `${typeof warning === 'string' ? warning : warning.name} ${rest.map(String).join(' ')}`;
  if (text.includes('NodeVersionSupportWarning')) return;
  (emitWarning as (...args: unknown[]) => void)(warning, ...rest);
}) as typeof process.emitWarning;

await runCli(hideBin(process.argv));
