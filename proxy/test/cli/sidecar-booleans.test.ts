// The sidecar's true/false flags read through their real yargs definitions (sidecarOptions) and
// the configuration parser, as `walproxy sidecar` does: a bare flag is true, the spellings that
// worked before keep working, and any other value is refused naming the flag.
import { afterEach, describe, expect, it } from 'vitest';
import yargs from 'yargs';
import { sidecarOptions } from '../../src/cli/sidecar-command.js';
import { parseSidecarConfig, type SidecarConfig } from '../../src/config/sidecar-config.js';

/** Every true/false flag of `walproxy sidecar`. */
const BOOLEAN_FLAGS = [
  'fence-on-stop',
  'wal-durable-ack',
  'wal-seal-when-producers-wait',
  's3-force-path-style',
  's3-disable-express-session-auth',
  'peer-tls',
  'peer-tls-verify-hostname',
  'metadata-tls',
  'zone-client-rack',
  'zone-ingress-unauthenticated',
];

const BASE = ['--broker-id=1', '--client-listen=127.0.0.1:9192', '--client-upstream=127.0.0.1:9092'];
const WAL = [...BASE, '--wal-store-url=file:///tmp/walproxy-booleans', '--wal-topic=wal-*'];

function raw(args: string[]): Record<string, unknown> {
  return sidecarOptions(yargs(args).env('WALPROXY')).strict().parseSync();
}

function parse(args: string[]): { config: SidecarConfig } | { errors: string[] } {
  return parseSidecarConfig(raw(args));
}

function config(args: string[]): SidecarConfig {
  const parsed = parse(args);
  if ('errors' in parsed) throw new Error(parsed.errors.join('\n'));
  return parsed.config;
}

afterEach(() => {
  delete process.env.WALPROXY_WAL_DURABLE_ACK;
});

describe('walproxy sidecar true/false flags', () => {
  it.each(BOOLEAN_FLAGS)('reads a bare --%s as true, also before another flag', (name) => {
    expect(raw([`--${name}`])[name]).toBe(true);
    expect(raw([`--${name}`, '--broker-id=1'])[name]).toBe(true);
  });

  it.each(BOOLEAN_FLAGS)(
    "refuses --%s=yes, naming the flag (yargs' boolean would read it as false)",
    (name) => {
      // --zone: the zone flags are read only with it (the errors of its other settings do not matter here)
      const parsed = parse([...WAL, '--zone=a', `--${name}=yes`]);
      expect('errors' in parsed && parsed.errors).toContain(`--${name}: 'yes' is not true or false`);
    },
  );

  it('takes a bare --wal-durable-ack, and every spelling that worked before', () => {
    const durable = (args: string[]) => config([...WAL, ...args]).wal!.defaults.durableAck;
    expect(durable(['--wal-durable-ack'])).toBe(true);
    expect(durable(['--wal-durable-ack=true'])).toBe(true);
    expect(durable(['--wal-durable-ack', 'true'])).toBe(true);
    expect(durable(['--wal-durable-ack=false'])).toBe(false);
    expect(durable(['--wal-durable-ack', 'false'])).toBe(false);
    expect(durable(['--no-wal-durable-ack'])).toBe(false);
    // Unset: the documented default
    expect(durable([])).toBe(false);
    // From the environment, as deployments set it
    process.env.WALPROXY_WAL_DURABLE_ACK = 'true';
    expect(durable([])).toBe(true);
    // An empty variable is unset, not a bare flag
    process.env.WALPROXY_WAL_DURABLE_ACK = '';
    expect(durable([])).toBe(false);
  });

  it('keeps the defaults of the flags that default to true, and a bare flag sets the others', () => {
    const defaulted = config(WAL);
    expect(defaulted.fenceOnStop).toBe(true);
    expect(defaulted.wal!.sealWhenProducersWait).toBe(true);
    expect(config([...WAL, '--fence-on-stop=false']).fenceOnStop).toBe(false);
    expect(config([...WAL, '--wal-seal-when-producers-wait', 'false']).wal!.sealWhenProducersWait).toBe(
      false,
    );
    expect(config([...WAL, '--s3-force-path-style']).wal!.storeOptions.forcePathStyle).toBe(true);
  });

  it('refuses other spellings of a number or a word, as before', () => {
    for (const value of ['1', '0', 'TRUE', 'on']) {
      const parsed = parse([...WAL, `--wal-durable-ack=${value}`]);
      expect('errors' in parsed && parsed.errors, value).toContain(
        `--wal-durable-ack: '${value}' is not true or false`,
      );
    }
  });
});
