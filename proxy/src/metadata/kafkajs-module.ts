import type * as Kafkajs from 'kafkajs';

/**
 * kafkajs, loaded on first use (the sidecar must not evaluate it before its listeners open).
 * kafkajs is CommonJS: Node's import() names its exports, but the chunk esbuild's code splitting
 * makes of it exports only `default` (module.exports), so take that when it is there — named
 * imports from the chunk were undefined, and the metadata publisher never connected.
 */
export async function loadKafkajs(): Promise<typeof Kafkajs> {
  const loaded = (await import('kafkajs')) as typeof Kafkajs & { default?: typeof Kafkajs };
  return loaded.default ?? loaded;
}
