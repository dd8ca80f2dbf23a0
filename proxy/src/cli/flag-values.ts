// Flag values shared by the sidecar's option groups (config.ts, zone/zone-config.ts): lists,
// broker-id maps and address templates read the same way and refused with the same words.
import type { HostPort } from '../net/proxy-listener.js';
import type { FlagErrorSink } from '../store/s3-options.js';

export function present(value: unknown): boolean {
  return value !== undefined && value !== null && value !== '';
}

/** A repeatable, comma-separable flag's values, trimmed, empty ones dropped. */
export function list(value: unknown): string[] {
  if (!present(value)) return [];
  const items = Array.isArray(value) ? value : [value];
  return items
    .flatMap((item) => String(item).split(','))
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/** `<broker-id>=<host:port>` entries of `flag`, by broker id; a bad entry is reported and skipped. */
export function brokerAddresses(
  entries: string[],
  flag: string,
  parseHostPort: (text: string) => HostPort | string,
  errors: FlagErrorSink,
): Map<number, HostPort> {
  const addresses = new Map<number, HostPort>();
  for (const entry of entries) {
    const match = /^(\d+)=(.+)$/.exec(entry);
    const address = match ? parseHostPort(match[2]!) : undefined;
    if (!match || typeof address !== 'object') {
      errors.add(flag, `'${entry}' is not <broker-id>=<host:port>`);
      continue;
    }
    addresses.set(Number(match[1]), address);
  }
  return addresses;
}

/** A `host:port` template with `{id}` for the broker id (`example` shows one); undefined when unset. */
export function addressTemplate(
  value: unknown,
  flag: string,
  example: string,
  parseHostPort: (text: string) => HostPort | string,
  errors: FlagErrorSink,
): string | undefined {
  const template = present(value) ? String(value) : undefined;
  if (
    template !== undefined &&
    (!template.includes('{id}') || typeof parseHostPort(template.replaceAll('{id}', '0')) === 'string')
  ) {
    errors.add(flag, `'${template}' must be host:port containing {id}, e.g. ${example}`);
  }
  return template;
}

/** Broker ids of a list flag; a value that is not one is reported and skipped. */
export function brokerIds(entries: string[], flag: string, errors: FlagErrorSink): number[] {
  const ids: number[] = [];
  for (const id of entries) {
    if (!/^\d+$/.test(id)) errors.add(flag, `'${id}' is not a broker id`);
    else ids.push(Number(id));
  }
  return ids;
}
