// `walproxy sidecar --config <file>`: settings from a YAML (or JSON) file. The YAML parser is
// ~250 KB of code; it is loaded with import() only when the command line or WALPROXY_CONFIG names a
// file, so that it stays out of what every other start parses before its listeners open (issue
// #12: a sidecar ready within 2 s; proxy/bundle.mjs keeps it in a chunk of its own).
import { readFileSync } from 'node:fs';

type ParseYaml = (text: string) => unknown;
let parseYaml: ParseYaml | undefined;

/** Whether yargs will read a config file: `--config <f>`, `--config=<f>`, or WALPROXY_CONFIG. */
export function namesConfigFile(args: readonly string[], env: NodeJS.ProcessEnv): boolean {
  if (env.WALPROXY_CONFIG !== undefined && env.WALPROXY_CONFIG !== '') return true;
  // Past a bare `--` every word is positional, as yargs reads it.
  const end = args.indexOf('--');
  return (end === -1 ? args : args.slice(0, end)).some((a) => a === '--config' || a.startsWith('--config='));
}

/** Loads the YAML parser that readConfigFile needs; call before yargs parses when namesConfigFile. */
export async function loadConfigFileParser(): Promise<void> {
  // yaml is CommonJS for Node: the chunk esbuild's code splitting makes of it exports only
  // `default` (module.exports), where Node's own import() also names `parse`.
  const loaded = (await import('yaml')) as { parse?: ParseYaml; default?: { parse: ParseYaml } };
  parseYaml ??= loaded.parse ?? loaded.default?.parse;
}

/**
 * Settings from a YAML (or JSON, a YAML subset) file: keys are the flag names, lists for
 * repeatable flags. Precedence: command-line flags, then WALPROXY_* variables, then the file,
 * then defaults. Synchronous, as yargs calls it; the parser must have been loaded.
 */
export function readConfigFile(path: string): Record<string, unknown> {
  if (parseYaml === undefined) {
    // namesConfigFile and yargs disagree on whether a file was named: a bug here, said plainly.
    throw new Error(`--config ${path}: internal error: the YAML parser was not loaded before parsing`);
  }
  let parsed: unknown;
  try {
    parsed = parseYaml(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new Error(`--config ${path}: ${(error as Error).message.split('\n')[0]}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new Error(`--config ${path}: expected a mapping of flag names to values`);
  }
  return parsed as Record<string, unknown>;
}
