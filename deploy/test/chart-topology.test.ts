/**
 * The chart wires every broker pod the way the e2e harness wires its brokers: both follow
 * e2e/src/cluster/topology-rules.ts. For each broker pod of a rendered chart this test runs what
 * the pod would run — the pod-identity init container (against a fake API server that knows the
 * node's zone), start-kafka.sh (with a stub Kafka that keeps the server.properties it is given)
 * and start-walproxy.sh (with a stub entry point that keeps its argv) — with the environment the
 * StatefulSet gives each container, and compares the broker settings and sidecar flags with what
 * the rules say for that pod. The expected values come from the chart's values, never from the
 * rendered output.
 */
import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  brokerListenerSettings,
  brokerQuorumVoters,
  egressBrokerIds,
  egressPort,
  replicationAdvertisedAddress,
  sidecarFlags,
  walStoreUrlForZone,
} from '../../e2e/src/cluster/topology-rules.js';
import { memoryBounds, nodeHeapFlags } from '../../proxy/src/memory-budget.js';
import { chartDir, find, type K8sObject, parseLikeWalproxy, parseQuantity, renderChart } from './chart.js';

const run = promisify(execFile);
const NAMESPACE = 'streaming';
const RELEASE = 'kafka';
const TOKEN = 'test-service-account-token';

// biome-ignore lint/suspicious/noExplicitAny: chart values are free-form YAML
type Values = any;

function deepMerge(base: Values, over: Values): Values {
  if (typeof base !== 'object' || base === null || Array.isArray(base)) return over;
  if (typeof over !== 'object' || over === null || Array.isArray(over)) return over;
  const out = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = k in base ? deepMerge(base[k], v) : v;
  return out;
}

function loadValues(files: string[]): Values {
  return files.reduce(
    (values, file) => deepMerge(values, parse(readFileSync(path.resolve(chartDir, file), 'utf8'))),
    parse(readFileSync(path.join(chartDir, 'values.yaml'), 'utf8')),
  );
}

/** server.properties as Kafka reads it: `key=value` lines, comments skipped, the last one wins. */
function readProperties(text: string): Map<string, string> {
  const props = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    props.set(line.slice(0, eq), line.slice(eq + 1));
  }
  return props;
}

/** `--flag=value` list → flag → values in order (repeated flags keep their order). */
function flagMap(flags: string[]): Map<string, string[]> {
  const map = new Map<string, string[]>();
  for (const flag of flags) {
    const match = /^(--[a-z0-9-]+)=(.*)$/s.exec(flag);
    if (!match) throw new Error(`not --flag=value: ${flag}`);
    map.set(match[1]!, [...(map.get(match[1]!) ?? []), match[2]!]);
  }
  return map;
}

/** A fake Kubernetes API that answers GET /api/v1/nodes/<name> for a bearer token. */
class FakeApiServer {
  readonly nodes = new Map<string, Record<string, string>>();
  private server = http.createServer((req, res) => {
    const name = /^\/api\/v1\/nodes\/([^/]+)$/.exec(req.url ?? '')?.[1];
    if (req.headers.authorization !== `Bearer ${TOKEN}`) return void res.writeHead(401).end('unauthorized');
    const labels = name ? this.nodes.get(decodeURIComponent(name)) : undefined;
    if (!labels) return void res.writeHead(404).end('not found');
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Node', metadata: { name, labels } }));
  });
  url = '';
  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  async stop(): Promise<void> {
    await new Promise((resolve) => this.server.close(resolve));
  }
}

interface Container {
  name: string;
  command: string[];
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }>;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
  ports?: Array<{ name: string; containerPort: number }>;
}

/** One broker pod on a local directory tree: the ConfigMap, the shared emptyDir, a stub Kafka. */
class SimulatedPod {
  readonly root: string;
  readonly dirs: Record<string, string>;

  constructor(
    readonly podName: string,
    readonly nodeName: string,
    configMap: K8sObject,
    readonly api: FakeApiServer,
  ) {
    this.root = mkdtempSync(path.join(os.tmpdir(), `walproxy-pod-${podName}-`));
    this.dirs = {
      config: path.join(this.root, 'config'),
      pod: path.join(this.root, 'pod'),
      'kube-api-access': path.join(this.root, 'serviceaccount'),
      kafka: path.join(this.root, 'kafka'),
      out: path.join(this.root, 'out'),
    };
    for (const dir of Object.values(this.dirs)) mkdirSync(dir, { recursive: true });
    for (const [key, value] of Object.entries(configMap.data as Record<string, string>))
      writeFileSync(path.join(this.dirs.config!, key), value);
    writeFileSync(path.join(this.dirs['kube-api-access']!, 'token'), TOKEN);
    mkdirSync(path.join(this.dirs.kafka!, 'bin'));
    writeFileSync(
      path.join(this.dirs.kafka!, 'bin/kafka-storage.sh'),
      `#!/bin/sh\nprintf '%s\\n' "$@" > "${this.dirs.out}/kafka-storage.args"\n`,
    );
    writeFileSync(
      path.join(this.dirs.kafka!, 'bin/kafka-server-start.sh'),
      `#!/bin/sh\ncp "$1" "${this.dirs.out}/server.properties"\n`,
    );
    writeFileSync(
      path.join(this.dirs.out!, 'main.mjs'),
      `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(`${this.dirs.out}/walproxy.argv`)}, JSON.stringify(process.argv.slice(2)));\nwriteFileSync(${JSON.stringify(`${this.dirs.out}/walproxy.execArgv`)}, JSON.stringify(process.execArgv));\n`,
    );
    for (const script of ['kafka-storage.sh', 'kafka-server-start.sh'])
      chmodSync(path.join(this.dirs.kafka!, 'bin', script), 0o755);
  }

  /** Runs a container's command and args as the kubelet would, with its mounts on local dirs. */
  async runContainer(container: Container): Promise<void> {
    const mounts = (container.volumeMounts ?? []).map((m) => [m.mountPath, this.dirs[m.name]] as const);
    const local = (arg: string) => {
      for (const [mountPath, dir] of mounts)
        if (dir && arg.startsWith(`${mountPath}/`)) return dir + arg.slice(mountPath.length);
      return arg;
    };
    const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
    for (const e of container.env ?? []) {
      const field = e.valueFrom?.fieldRef?.fieldPath;
      if (field === 'metadata.name') env[e.name] = this.podName;
      else if (field === 'spec.nodeName') env[e.name] = this.nodeName;
      else if (e.value !== undefined) env[e.name] = e.value;
      else throw new Error(`${container.name}: env ${e.name} has a source the simulation does not know`);
    }
    Object.assign(env, {
      // Where the mounts are here, and where the in-cluster API and the image's entry point are.
      WALPROXY_CONFIG_DIR: this.dirs.config!,
      WALPROXY_POD_DIR: this.dirs.pod!,
      WALPROXY_SERVICE_ACCOUNT_DIR: this.dirs['kube-api-access']!,
      WALPROXY_KUBE_API: this.api.url,
      WALPROXY_MAIN: path.join(this.dirs.out!, 'main.mjs'),
    });
    if ('KAFKA_HOME' in env) env.KAFKA_HOME = this.dirs.kafka!;
    const [command, ...args] = [...container.command, ...(container.args ?? [])].map(local);
    await run(command!, args, { env, cwd: this.root });
  }

  output(file: string): string {
    return readFileSync(path.join(this.dirs.out!, file), 'utf8');
  }

  remove(): void {
    rmSync(this.root, { recursive: true, force: true });
  }
}

const VARIANTS: Array<{ name: string; files: string[]; zones: string[] }> = [
  { name: 'default values', files: [], zones: ['zone-a', 'zone-b', 'zone-c'] },
  {
    name: 'three-zone S3 Express values',
    files: ['values-s3express-3az.yaml'],
    zones: ['use1-az4', 'use1-az5', 'use1-az6'],
  },
  {
    name: 'five brokers, other ports, a store for two zones of three',
    files: [fileURLToPath(new URL('./fixtures/values-5-brokers.yaml', import.meta.url))],
    zones: ['zone-a', 'zone-b', 'zone-c'],
  },
];

describe.each(VARIANTS)(
  'the chart with $name wires every broker pod by topology-rules.ts',
  ({ files, zones }) => {
    const values = loadValues(files);
    const objects = renderChart({ release: RELEASE, namespace: NAMESPACE, valuesFiles: files });
    const configMap = find(objects, 'ConfigMap', `${RELEASE}-walproxy-config`);
    const sts = find(objects, 'StatefulSet', `${RELEASE}-walproxy-broker`);
    const controllers = find(objects, 'StatefulSet', `${RELEASE}-walproxy-controller`);
    const podSpec = sts.spec.template.spec;
    const all = [...(podSpec.initContainers ?? []), ...podSpec.containers] as Container[];
    const container = (name: string) => all.find((c) => c.name === name)!;
    const ids = [...Array(values.brokers.replicas as number).keys()];
    const w = values.walproxy;
    const domain = values.clusterDomain as string;
    // Kubernetes gives StatefulSet pod N the DNS name <sts>-N.<serviceName>.<namespace>.svc.<domain>.
    const podHost = (set: K8sObject, n: number) =>
      `${set.metadata.name}-${n}.${set.spec.serviceName}.${NAMESPACE}.svc.${domain}`;
    const api = new FakeApiServer();
    const zoneOf = (id: number) => zones[id % zones.length]!;
    const pods = new Map<
      number,
      { props: Map<string, string>; argv: string[]; execArgv: string[]; storage: string[] }
    >();
    // The KRaft voters as the controllers know themselves (their pods' DNS names).
    const voters = () =>
      [...Array(values.controllers.replicas as number).keys()].map((n) => ({
        id: values.controllers.nodeIdBase + n,
        address: `${podHost(controllers, n)}:${values.controllers.port}`,
      }));

    beforeAll(async () => {
      await api.start();
      for (const id of ids) {
        const nodeName = `node-${id}`;
        api.nodes.set(nodeName, {
          [values.brokers.rack.nodeLabel]: zoneOf(id),
          'kubernetes.io/hostname': nodeName,
        });
        const pod = new SimulatedPod(`${sts.metadata.name}-${id}`, nodeName, configMap, api);
        try {
          await pod.runContainer(container('pod-identity'));
          await pod.runContainer(container('kafka'));
          await pod.runContainer(container('walproxy'));
          pods.set(id, {
            props: readProperties(pod.output('server.properties')),
            argv: JSON.parse(pod.output('walproxy.argv')),
            execArgv: JSON.parse(pod.output('walproxy.execArgv')),
            storage: pod.output('kafka-storage.args').trim().split('\n'),
          });
        } finally {
          pod.remove();
        }
      }
    }, 60_000);
    afterAll(() => api.stop());

    it('has one broker pod per broker id, spread over zones', () => {
      expect(sts.spec.replicas).toBe(ids.length);
      expect(podSpec.topologySpreadConstraints[0]).toMatchObject({
        topologyKey: values.brokers.rack.nodeLabel,
        whenUnsatisfiable: 'DoNotSchedule',
        maxSkew: 1,
      });
    });

    for (const id of ids) {
      it(`broker ${id}: listeners, advertised listeners, rack and node.id`, () => {
        const props = pods.get(id)!.props;
        const expected = brokerListenerSettings({
          brokerId: id,
          upstreamHost: '127.0.0.1',
          clientUpstreamPort: values.brokers.ports.client,
          replicationUpstreamPort: values.brokers.ports.replication,
          clientAdvertisedHost: podHost(sts, id),
          clientAdvertisedPort: w.ports.client,
          egressBase: w.ports.egressBase,
          rack: zoneOf(id),
        });
        expect(Object.fromEntries([...props].filter(([k]) => k in expected))).toEqual(expected);
        expect(props.get('node.id')).toBe(String(id));
        expect(props.get('process.roles')).toBe('broker');
        expect(props.get('controller.listener.names')).toBe('CONTROLLER');
        expect(props.get('replica.selector.class')).toBe(
          'org.apache.kafka.common.replica.RackAwareReplicaSelector',
        );
        // Through the sidecar's controller listeners in the pod (fate sharing)
        expect(props.get('controller.quorum.voters')).toBe(
          brokerQuorumVoters(voters(), { host: '127.0.0.1', base: w.ports.controllerBase }),
        );
      });

      it(`broker ${id}: sidecar flags`, async () => {
        const { argv, props } = pods.get(id)!;
        expect(argv[0]).toBe('sidecar');
        const storeUrl = walStoreUrlForZone(w.wal.storeUrlByZone, zoneOf(id), w.wal.storeUrl);
        const expected = sidecarFlags({
          brokerId: id,
          clientListen: `0.0.0.0:${w.ports.client}`,
          clientUpstream: `127.0.0.1:${values.brokers.ports.client}`,
          replicationListen: `0.0.0.0:${w.ports.replication}`,
          replicationUpstream: `127.0.0.1:${values.brokers.ports.replication}`,
          egressBase: w.ports.egressBase,
          egressBrokerIds: egressBrokerIds('pod-namespace', id, ids),
          peers: {
            template: `${podHost(sts, 0).replace(`${sts.metadata.name}-0.`, `${sts.metadata.name}-{id}.`)}:${w.ports.replication}`,
          },
          adminListen: `0.0.0.0:${w.ports.admin}`,
          controllers: { listenBase: w.ports.controllerBase, voters: voters() },
          ...(storeUrl ? { wal: { storeUrl, topics: w.wal.topics, topicConfigs: w.wal.topicConfig } } : {}),
        });
        const actual = flagMap(argv.slice(1));
        for (const [flag, wanted] of flagMap(expected)) expect(actual.get(flag), flag).toEqual(wanted);
        // Flags beyond the wiring are settings from values, never a second copy of a wiring flag.
        const extra = [...actual.keys()].filter((f) => !flagMap(expected).has(f));
        expect(
          extra.every((f) => !/listen|upstream|egress|peer|broker-id|wal-store/.test(f)),
          extra.join(),
        ).toBe(true);
        // walproxy itself accepts them.
        expect(await parseLikeWalproxy(argv)).toEqual([]);

        // The pieces meet: the broker's upstream listeners are what the sidecar forwards to.
        const listeners = props.get('listeners')!;
        expect(listeners).toContain(`CLIENT://${actual.get('--client-upstream')![0]}`);
        expect(listeners).toContain(`REPLICATION://${actual.get('--replication-upstream')![0]}`);
      });
    }

    it("each broker's controller voters are its own sidecar's controller listeners, forwarding to the controllers", () => {
      for (const id of ids) {
        const { props, argv } = pods.get(id)!;
        const flags = flagMap(argv.slice(1));
        const base = Number(flags.get('--controller-listen-base')![0]);
        const forwards = new Map(
          flags.get('--controller-address')!.map((entry) => entry.split('=') as [string, string]),
        );
        for (const voter of props.get('controller.quorum.voters')!.split(',')) {
          const [, voterId, port] = /^(\d+)@127\.0\.0\.1:(\d+)$/.exec(voter)!;
          // The listener the broker dials for voter V is the sidecar's for V…
          expect(Number(port)).toBe(base + Number(voterId));
          // …and it forwards to V's own CONTROLLER listener, as the controllers advertise it
          const controller = voters().find((v) => v.id === Number(voterId))!;
          expect(forwards.get(voterId!)).toBe(controller.address);
        }
      }
    });

    it('gives V8 the heap share of the sidecar container’s memory limit', () => {
      const env = container('walproxy').env ?? [];
      const nodeOptions = env.find((e) => e.name === 'NODE_OPTIONS')?.value;
      const limit = parseQuantity(w.resources.limits.memory);
      expect(nodeOptions).toBe(nodeHeapFlags(memoryBounds(limit, 'cgroup')).maxOldSpace);
    });

    it("starts the sidecar's node with V8's old generation at half the heap share", () => {
      const limit = parseQuantity(w.resources.limits.memory);
      const { initialOldSpace } = nodeHeapFlags(memoryBounds(limit, 'cgroup'));
      for (const id of ids) expect(pods.get(id)!.execArgv).toEqual([initialOldSpace]);
    });

    it('every broker advertises REPLICATION at an egress that every sidecar opens', () => {
      for (const leader of ids) {
        const advertised = pods.get(leader)!.props.get('advertised.listeners')!;
        expect(advertised).toContain(
          `REPLICATION://${replicationAdvertisedAddress(leader, w.ports.egressBase)}`,
        );
        for (const follower of ids) {
          const flags = flagMap(pods.get(follower)!.argv.slice(1));
          const base = Number(flags.get('--egress-listen-base')![0]);
          const opened = flags.get('--egress-broker-ids')![0]!.split(',').map(Number);
          expect(opened).toContain(leader);
          expect(base + leader).toBe(egressPort(leader, w.ports.egressBase));
          // …and that egress forwards to the leader's replication ingress, on the leader's pod.
          const peer = flags.get('--peer-address-template')![0]!.replace('{id}', String(leader));
          expect(peer).toBe(`${podHost(sts, leader)}:${w.ports.replication}`);
        }
      }
    });

    it('advertised CLIENT addresses reach the sidecars through the headless service', () => {
      const headless = find(objects, 'Service', sts.spec.serviceName);
      expect(headless.spec.clusterIP).toBe('None');
      expect(headless.spec.publishNotReadyAddresses).toBe(true);
      expect(headless.spec.selector).toEqual(sts.spec.selector.matchLabels);
      const sidecarPorts = container('walproxy').ports ?? [];
      for (const id of ids) {
        const advertised = pods.get(id)!.props.get('advertised.listeners')!;
        const client = /CLIENT:\/\/([^,]+):(\d+)/.exec(advertised)!;
        expect(client[1]).toBe(podHost(sts, id));
        expect(sidecarPorts.find((p) => p.name === 'client')!.containerPort).toBe(Number(client[2]));
        expect(headless.spec.ports.map((p: { port: number }) => p.port)).toContain(Number(client[2]));
      }
    });

    it('formats each broker with the cluster id, a canonical 16-byte base64url uuid', () => {
      for (const id of ids) {
        const args = pods.get(id)!.storage;
        const clusterId = args[args.indexOf('--cluster-id') + 1]!;
        expect(Buffer.from(clusterId, 'base64url')).toHaveLength(16);
        expect(Buffer.from(clusterId, 'base64url').toString('base64url')).toBe(clusterId);
        expect(args).toContain('--ignore-formatted');
      }
    });

    it('controllers: node ids above the brokers, voters that match their own listeners', async () => {
      const cm = configMap.data as Record<string, string>;
      for (let n = 0; n < values.controllers.replicas; n++) {
        const pod = new SimulatedPod(`${controllers.metadata.name}-${n}`, `node-${n}`, configMap, api);
        try {
          await pod.runContainer(controllers.spec.template.spec.containers[0]);
          const props = readProperties(pod.output('server.properties'));
          const nodeId = values.controllers.nodeIdBase + n;
          expect(props.get('node.id')).toBe(String(nodeId));
          expect(nodeId).toBeGreaterThanOrEqual(ids.length);
          expect(props.get('process.roles')).toBe('controller');
          expect(props.get('controller.quorum.voters')).toContain(
            `${nodeId}@${podHost(controllers, n)}:${values.controllers.port}`,
          );
          expect(props.get('advertised.listeners')).toBe(
            `CONTROLLER://${podHost(controllers, n)}:${values.controllers.port}`,
          );
        } finally {
          pod.remove();
        }
      }
      expect(cm['broker.properties']).not.toContain('CONTROLLER://');
    });
  },
);
