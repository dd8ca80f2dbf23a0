// The message codecs as data, so tests can run over every message, direction and version.

import type fc from 'fast-check';
import {
  decodeApiVersionsRequest,
  decodeApiVersionsResponse,
  decodeDescribeClusterRequest,
  decodeDescribeClusterResponse,
  decodeFetchRequest,
  decodeFetchResponse,
  decodeFindCoordinatorRequest,
  decodeFindCoordinatorResponse,
  decodeMetadataRequest,
  decodeMetadataResponse,
  decodeProduceRequest,
  decodeProduceResponse,
  encodeApiVersionsRequest,
  encodeApiVersionsResponse,
  encodeDescribeClusterRequest,
  encodeDescribeClusterResponse,
  encodeFetchRequest,
  encodeFetchResponse,
  encodeFindCoordinatorRequest,
  encodeFindCoordinatorResponse,
  encodeMetadataRequest,
  encodeMetadataResponse,
  encodeProduceRequest,
  encodeProduceResponse,
} from '../../src/index.js';
import * as arb from './arbitraries.js';

export interface Codec {
  /** e.g. `FetchResponse` */
  name: string;
  api: 'ApiVersions' | 'Metadata' | 'Produce' | 'Fetch' | 'FindCoordinator' | 'DescribeCluster';
  direction: 'request' | 'response';
  versions: number[];
  decode: (body: Buffer, version: number) => unknown;
  encode: (msg: never, version: number) => Buffer;
  arbitrary: (version: number) => fc.Arbitrary<unknown>;
}

const range = (min: number, max: number): number[] =>
  Array.from({ length: max - min + 1 }, (_, i) => min + i);

export const CODECS: Codec[] = [
  {
    name: 'ApiVersionsRequest',
    api: 'ApiVersions',
    direction: 'request',
    versions: range(0, 4),
    decode: decodeApiVersionsRequest,
    encode: encodeApiVersionsRequest,
    arbitrary: arb.apiVersionsRequest,
  },
  {
    name: 'ApiVersionsResponse',
    api: 'ApiVersions',
    direction: 'response',
    versions: range(0, 4),
    decode: decodeApiVersionsResponse,
    encode: encodeApiVersionsResponse,
    arbitrary: arb.apiVersionsResponse,
  },
  {
    name: 'MetadataRequest',
    api: 'Metadata',
    direction: 'request',
    versions: range(0, 13),
    decode: decodeMetadataRequest,
    encode: encodeMetadataRequest,
    arbitrary: arb.metadataRequest,
  },
  {
    name: 'MetadataResponse',
    api: 'Metadata',
    direction: 'response',
    versions: range(0, 13),
    decode: decodeMetadataResponse,
    encode: encodeMetadataResponse,
    arbitrary: arb.metadataResponse,
  },
  {
    name: 'ProduceRequest',
    api: 'Produce',
    direction: 'request',
    versions: range(3, 13),
    decode: decodeProduceRequest,
    encode: encodeProduceRequest,
    arbitrary: arb.produceRequest,
  },
  {
    name: 'ProduceResponse',
    api: 'Produce',
    direction: 'response',
    versions: range(3, 13),
    decode: decodeProduceResponse,
    encode: encodeProduceResponse,
    arbitrary: arb.produceResponse,
  },
  {
    name: 'FetchRequest',
    api: 'Fetch',
    direction: 'request',
    versions: range(4, 18),
    decode: decodeFetchRequest,
    encode: encodeFetchRequest,
    arbitrary: arb.fetchRequest,
  },
  {
    name: 'FetchResponse',
    api: 'Fetch',
    direction: 'response',
    versions: range(4, 18),
    decode: decodeFetchResponse,
    encode: encodeFetchResponse,
    arbitrary: arb.fetchResponse,
  },
  {
    name: 'FindCoordinatorRequest',
    api: 'FindCoordinator',
    direction: 'request',
    versions: range(0, 6),
    decode: decodeFindCoordinatorRequest,
    encode: encodeFindCoordinatorRequest,
    arbitrary: arb.findCoordinatorRequest,
  },
  {
    name: 'FindCoordinatorResponse',
    api: 'FindCoordinator',
    direction: 'response',
    versions: range(0, 6),
    decode: decodeFindCoordinatorResponse,
    encode: encodeFindCoordinatorResponse,
    arbitrary: arb.findCoordinatorResponse,
  },
  {
    name: 'DescribeClusterRequest',
    api: 'DescribeCluster',
    direction: 'request',
    versions: range(0, 2),
    decode: decodeDescribeClusterRequest,
    encode: encodeDescribeClusterRequest,
    arbitrary: arb.describeClusterRequest,
  },
  {
    name: 'DescribeClusterResponse',
    api: 'DescribeCluster',
    direction: 'response',
    versions: range(0, 2),
    decode: decodeDescribeClusterResponse,
    encode: encodeDescribeClusterResponse,
    arbitrary: arb.describeClusterResponse,
  },
];

export function codecFor(api: string, direction: 'request' | 'response'): Codec | undefined {
  return CODECS.find((c) => c.api === api && c.direction === direction);
}

/** Encodes with a codec whose message type is erased. */
export function encodeWith(codec: Codec, msg: unknown, version: number): Buffer {
  return codec.encode(msg as never, version);
}
