import { spawn } from 'node:child_process';

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a client program to completion, collecting its output; killed (and the promise rejected,
 * quoting the output's tail) after `timeoutMs`, so no test load runs unbounded. With `netns`, it
 * runs inside that network namespace (`ip netns exec` execs it, so the pid stays the program's).
 */
export function runBounded(
  command: string,
  args: string[],
  {
    input,
    timeoutMs,
    label = command,
    env,
    netns,
  }: { input?: string; timeoutMs: number; label?: string; env?: NodeJS.ProcessEnv; netns?: string },
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const [program, argv] =
      netns === undefined ? [command, args] : ['ip', ['netns', 'exec', netns, command, ...args]];
    const child = spawn(program, argv, {
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      ...(env ? { env } : {}),
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr!.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`${label} timed out after ${timeoutMs} ms\n${stdout.slice(-2000)}\n${stderr.slice(-2000)}`),
      );
    }, timeoutMs);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    if (input !== undefined) child.stdin!.end(input);
  });
}
