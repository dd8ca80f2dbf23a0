// The `walproxy` command tree. main.ts parses process.argv with it; gen-docs.ts renders every
// command's --help into docs/cli.md from the same definitions.
import { readFileSync } from 'node:fs';
import yargs, { type Argv } from 'yargs';
import { loadConfigFileParser, namesConfigFile } from './config-file.js';
import { costOptions, runCost } from './cost-command.js';
import { runSidecar, sidecarOptions } from './sidecar-command.js';
import { EXIT_CONFIG_ERROR } from './terminal.js';
import { walCommands } from './wal-command.js';

/** Columns --help wraps at; fixed so docs/cli.md does not depend on the terminal. */
export const HELP_WIDTH = 100;

export function walproxyVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}

/** The part of yargs' internals skipHelpRendering touches (yargs 18). */
interface YargsUsageInternals {
  getInternalMethods?: () => { getUsageInstance?: () => { cacheHelpMessage?: () => void } };
}

/**
 * yargs renders a command's whole --help each time it runs the command (`cacheHelpMessage`, for a
 * handler that might call showHelp later), synchronously, right after calling the handler: for
 * the sidecar's ~80 flags ~85–130 ms of CPU on an idle machine and several times that on a busy
 * one, spent between the listeners' listen() and their opening — on the path of every restart
 * (issue #12: ready within 2 s). No handler here shows help, and --help itself renders anew, so
 * the cached copy is never read. Through yargs' internals: if a later yargs lacks them, nothing
 * changes but the cost.
 */
function skipHelpRendering(cli: Argv): Argv {
  const usage = (cli as unknown as YargsUsageInternals).getInternalMethods?.().getUsageInstance?.();
  if (usage && typeof usage.cacheHelpMessage === 'function') usage.cacheHelpMessage = () => undefined;
  return cli;
}

export function buildCli(args: string[]): Argv {
  return skipHelpRendering(buildCommands(args));
}

/** Parses `args` and runs the command they name (main.ts): buildCli, plus what it loads first. */
export async function runCli(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  if (namesConfigFile(args, env)) await loadConfigFileParser();
  await buildCli(args).parseAsync();
}

function buildCommands(args: string[]): Argv {
  return yargs(args)
    .scriptName('walproxy')
    .env('WALPROXY')
    .command('sidecar', 'run the sidecar next to one Kafka broker', sidecarOptions, (argv) =>
      runSidecar(argv),
    )
    .command('wal', 'inspect, verify and clean up WAL objects (ls, inspect, verify, gc)', (y) =>
      walCommands(y, args),
    )
    .command(
      'cost',
      'monthly cost of stock cross-zone replication vs walproxy, and the break-even throughput and object size',
      (y) => costOptions(y),
      (argv) => runCost(argv),
    )
    .command('version', 'print the walproxy version', {}, () => {
      process.stdout.write(`walproxy ${walproxyVersion()} (node ${process.version})\n`);
    })
    .version(walproxyVersion())
    .demandCommand(1, 'name a command: walproxy --help')
    .strict()
    .fail((message, error) => {
      // One clear line instead of yargs' help dump; exit 2 marks a configuration error.
      process.stderr.write(`walproxy: ${message ?? error?.message}\n`);
      process.exit(EXIT_CONFIG_ERROR);
    })
    .help()
    .wrap(HELP_WIDTH);
}
