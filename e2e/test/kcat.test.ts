import { describe, expect, inject, it } from 'vitest';
import { createTopic } from '../src/clients/kafkajs.js';
import { kcat } from '../src/clients/kcat.js';

const TOPIC = 'e2e-kcat';

describe('kcat (librdkafka) through the sidecars', () => {
  it('produces and consumes every line, keyed, through the client ingress', async () => {
    const cluster = inject('cluster');
    await createTopic(cluster.bootstrap, TOPIC, { partitions: 3 });
    const lines = Array.from({ length: 5_000 }, (_, i) => `key-${i % 17}:value-${i}`);

    // When kcat produces the lines with acks=all (librdkafka negotiates its own Produce version)
    const produced = await kcat(
      [
        '-b',
        cluster.bootstrap,
        '-t',
        TOPIC,
        '-P',
        '-K',
        ':',
        '-X',
        'acks=all',
        '-X',
        'enable.idempotence=true',
      ],
      `${lines.join('\n')}\n`,
    );
    expect(produced.code, produced.stderr).toBe(0);

    // And kcat consumes the topic to its end
    const consumed = await kcat([
      '-b',
      cluster.bootstrap,
      '-t',
      TOPIC,
      '-C',
      '-o',
      'beginning',
      '-e',
      '-q',
      '-f',
      '%k:%s\\n',
    ]);
    expect(consumed.code, consumed.stderr).toBe(0);

    // Then every line came back exactly once
    const got = consumed.stdout.split('\n').filter((l) => l.length > 0);
    expect(got.length).toBe(lines.length);
    expect(new Set(got)).toEqual(new Set(lines));
  });
});
