// `make demo`'s program as a user runs it (smaller workload): as root, with iproute2 and nftables
// (`make demo` installs them), it reports kernel-counted bytes between zones, pair by pair, and the
// WAL arm moves far fewer of them than stock replication.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runBounded } from '../src/clients/run-bounded.js';
import { repoRoot } from '../src/cluster/paths.js';

const MB = (line: string) => [...line.matchAll(/([\d.]+) MB/g)].map((m) => Number(m[1]));

describe('make demo', () => {
  it('reports kernel-counted cross-zone bytes per zone pair, why bytes went inline, and the cost', async () => {
    // When the demo runs with 20,000 records per arm
    const root = repoRoot();
    const { code, stdout, stderr } = await runBounded(
      path.join(root, 'node_modules/.bin/tsx'),
      [path.join(root, 'e2e/src/demo.ts')],
      { timeoutMs: 280_000, label: 'demo', env: { ...process.env, DEMO_RECORDS: '20000' } },
    );
    console.log(stdout);
    expect(code, stderr.slice(-3000)).toBe(0);

    // Then it ran on three zones, and showed its seven phases
    expect(stdout).toContain('three zones: a network namespace per broker pod, the kernel counts');
    for (let p = 1; p <= 7; p++) expect(stdout).toMatch(new RegExp(`\\[${p}/7 +\\d+ s\\]`));
    expect(stdout).toContain('kernel-counted');

    // And every ordered zone pair has a line with the stock and the WAL arm's bytes
    for (const from of ['zone-a', 'zone-b', 'zone-c'])
      for (const to of ['zone-a', 'zone-b', 'zone-c']) {
        if (from === to) continue;
        const line = stdout.split('\n').find((l) => l.includes(`${from} → ${to}`));
        expect(line, `${from} → ${to}`).toBeDefined();
        expect(MB(line!)).toHaveLength(2);
      }
    // And the WAL arm was measured with the topic's group in the WAL on every leader, as a topic
    // in use is (a new group's first producer window replicates inline: demo.ts, warmUp)
    expect(stdout).toMatch(/warm-up \(not counted\): .* through the WAL on 3 of 3 leaders/);
    // And the WAL arm's bytes between zones are a small part of stock's
    const total = MB(stdout.split('\n').find((l) => l.includes('total between zones'))!);
    expect(total[0]!).toBeGreaterThan(10);
    const whyInline = stdout.slice(stdout.indexOf('what went inline'), stdout.indexOf('what it cost'));
    expect(total[1]!, whyInline).toBeLessThan(total[0]! * 0.2);
    expect(stdout).toMatch(/replicas byte-identical[\s\S]*replicas byte-identical/);
    expect(stdout).toContain('under-replicated partitions: none');

    // And it says what went inline and why (the stock arm's topic is outside the WAL), and prices
    // the run from the sidecars' counters
    expect(stdout).toMatch(
      /stock replication \(no WAL\):\n\s+leader side, batches sent inline by reason: .*topicNotInWal \d+/,
    );
    const cost = stdout.match(
      /stock replication, cross-zone: \$([\d.]+)[\s\S]*walproxy's replication: \$([\d.]+)[\s\S]*saved: \$(-?[\d.]+) = (-?[\d.]+) % of stock/,
    );
    expect(cost, 'the cost lines').not.toBeNull();
    // And walproxy's replication costs no more than stock's: the point of the product
    const [stockUsd, walUsd, savedUsd, savedPercent] = cost!.slice(1).map(Number);
    expect(savedUsd!, `stock $${stockUsd}, walproxy $${walUsd}`).toBeGreaterThanOrEqual(0);
    expect(savedPercent!).toBeGreaterThanOrEqual(0);
    expect(stdout).toContain('cluster and S3 server stopped');
  });
});
