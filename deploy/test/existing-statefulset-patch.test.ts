/**
 * deploy/patch/ adds walproxy to an existing Kafka StatefulSet. The patched StatefulSet must be a
 * valid object, and the sidecar flags and broker settings it documents must follow the same rules
 * as the chart and the e2e harness (e2e/src/cluster/topology-rules.ts).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  brokerListenerSettings,
  egressBrokerIds,
  sidecarFlags,
} from '../../e2e/src/cluster/topology-rules.js';
import { memoryBounds, nodeHeapFlags } from '../../proxy/src/memory-budget.js';
import {
  type K8sObject,
  parseLikeWalproxy,
  parseQuantity,
  repoRoot,
  schemaErrors,
  unknownFieldErrors,
} from './chart.js';

const dir = path.join(repoRoot, 'deploy/patch');
const load = (file: string) => parse(readFileSync(path.join(dir, file), 'utf8'));
const IDS = [0, 1, 2];
const podHost = (id: number) => `kafka-${id}.kafka-headless.kafka.svc.cluster.local`;

/** A strategic merge of the patch's init containers into the base (what kustomize does here). */
function patched(): K8sObject {
  const base = structuredClone(load('example-kafka-statefulset.yaml')) as K8sObject;
  const patch = load('walproxy-sidecar.yaml') as K8sObject;
  expect(patch.metadata.name).toBe(base.metadata.name);
  const spec = base.spec.template.spec;
  spec.initContainers = [...(spec.initContainers ?? []), ...patch.spec.template.spec.initContainers];
  return base;
}

describe('the patch for an existing Kafka StatefulSet', () => {
  it('patches into a valid StatefulSet', async () => {
    const sts = patched();
    expect(await schemaErrors([sts])).toEqual([]);
    expect(unknownFieldErrors([sts])).toEqual([]);
    expect(load('kustomization.yaml').patches).toEqual([{ path: 'walproxy-sidecar.yaml' }]);
  });

  it("starts node with V8's heap sized from the sidecar's memory limit, as the chart does", () => {
    const sidecar = patched().spec.template.spec.initContainers.find(
      (c: { name: string }) => c.name === 'walproxy',
    );
    const flags = nodeHeapFlags(memoryBounds(parseQuantity(sidecar.resources.limits.memory), 'cgroup'));
    expect(sidecar.command).toEqual([
      'node',
      flags.maxOldSpace,
      flags.initialOldSpace,
      '/app/proxy/dist/cli/walproxy.mjs',
    ]);
  });

  for (const id of IDS) {
    it(`broker ${id}: sidecar flags and broker settings follow topology-rules.ts`, async () => {
      const sidecar = patched().spec.template.spec.initContainers.find(
        (c: { name: string }) => c.name === 'walproxy',
      );
      expect(sidecar.restartPolicy).toBe('Always');
      const idEnv = sidecar.env.find((e: { name: string }) => e.name === 'WALPROXY_BROKER_ID');
      expect(idEnv.valueFrom.fieldRef.fieldPath).toBe("metadata.labels['apps.kubernetes.io/pod-index']");
      // The pod-index label is the ordinal: WALPROXY_BROKER_ID=<id> is --broker-id=<id>.
      const argv = [...sidecar.args, `--broker-id=${id}`];
      const expected = sidecarFlags({
        brokerId: id,
        clientListen: '0.0.0.0:9192',
        clientUpstream: '127.0.0.1:9092',
        replicationListen: '0.0.0.0:9193',
        replicationUpstream: '127.0.0.1:9093',
        egressBase: 19000,
        egressBrokerIds: egressBrokerIds('pod-namespace', id, IDS),
        peers: { template: 'kafka-{id}.kafka-headless.kafka.svc.cluster.local:9193' },
        adminListen: '0.0.0.0:9180',
      });
      expect([...argv.slice(1)].sort()).toEqual([...expected].sort());
      expect(await parseLikeWalproxy(argv)).toEqual([]);

      const text = readFileSync(path.join(dir, 'broker-listeners.properties'), 'utf8')
        .replaceAll(/\$\{POD_HOST\}/g, podHost(id))
        .replaceAll(/\$\{EGRESS_PORT\}/g, String(19000 + id));
      const props = Object.fromEntries(
        text
          .split('\n')
          .filter((l) => l && !l.startsWith('#'))
          .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
      );
      expect(props).toEqual(
        brokerListenerSettings({
          brokerId: id,
          upstreamHost: '127.0.0.1',
          clientUpstreamPort: 9092,
          replicationUpstreamPort: 9093,
          clientAdvertisedHost: podHost(id),
          clientAdvertisedPort: 9192,
          egressBase: 19000,
        }),
      );
    });
  }
});
