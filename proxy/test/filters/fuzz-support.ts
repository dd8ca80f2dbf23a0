// What the filters' fuzz tests share: the frames captured from a real cluster
// (proxy/test/fixtures/fuzz, see its README) and the seeded mutations of e2e/src/fuzz.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ProtocolError } from '@walproxy/shared';
import { framed } from '../../../e2e/src/fuzz/mutations.js';

export * from '../../../e2e/src/fuzz/mutations.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/fuzz/', import.meta.url));

// ---- fixtures --------------------------------------------------------------------------------------

export interface FuzzManifest {
  kafkaVersion: string;
  /** The store URL the leader's references name. */
  storeUrl: string;
  /** Topic ids by name. */
  topics: Record<string, string>;
  walTopics: string[];
  produce: Array<{ version: number; batches: string[] }>;
  clients: string[];
  fetch: Array<{ name: string; apiVersion: number }>;
  objects: Array<{ file: string; key: string }>;
}

export interface ProduceFixture {
  name: string;
  version: number;
  /** Whole frames, size prefix included. */
  request: Buffer;
  response: Buffer;
}

export interface FetchFixture {
  name: string;
  version: number;
  /** The request as the follower broker sent it (to its egress sidecar). */
  followerRequest: Buffer;
  /** The same request as the follower's sidecar forwarded it, marked with the capability tag. */
  markedRequest: Buffer;
  /** The leader broker's answer to the marked request. */
  stockResponse: Buffer;
  /** The leader sidecar's answer, with references. */
  referencedResponse: Buffer;
}

export interface FuzzFixtures {
  manifest: FuzzManifest;
  produce: ProduceFixture[];
  fetch: FetchFixture[];
  /** WAL objects by key, as the leader's sidecar stored them. */
  objects: Map<string, Buffer>;
}

let loaded: FuzzFixtures | undefined;

export function fuzzFixtures(): FuzzFixtures {
  if (loaded) return loaded;
  const manifest = JSON.parse(readFileSync(`${FIXTURES}manifest.json`, 'utf8')) as FuzzManifest;
  const read = (file: string) => framed(readFileSync(`${FIXTURES}${file}`));
  const produce: ProduceFixture[] = [
    ...manifest.produce.map(({ version }) => ({
      name: `Produce v${version}`,
      version,
      request: read(`produce/Produce-v${version}-request.bin`),
      response: read(`produce/Produce-v${version}-response.bin`),
    })),
    ...manifest.clients.map((client) => {
      const request = read(`produce/${client}-request.bin`);
      return {
        name: client,
        version: request.readInt16BE(6),
        request,
        response: read(`produce/${client}-response.bin`),
      };
    }),
  ];
  const fetch = manifest.fetch.map(({ name, apiVersion }) => ({
    name,
    version: apiVersion,
    followerRequest: read(`fetch/${name}-follower-request.bin`),
    markedRequest: read(`fetch/${name}-marked-request.bin`),
    stockResponse: read(`fetch/${name}-stock-response.bin`),
    referencedResponse: read(`fetch/${name}-referenced-response.bin`),
  }));
  const objects = new Map(
    manifest.objects.map(({ file, key }) => [key, readFileSync(`${FIXTURES}objects/${file}`)]),
  );
  loaded = { manifest, produce, fetch, objects };
  return loaded;
}

/** Whether `error` is what a filter throws for bytes its codec cannot read (the pipe then closes the connection). */
export function isProtocolError(error: unknown): boolean {
  return error instanceof ProtocolError;
}
