import type { TestProject } from 'vitest/node';
import type { ClusterInfo, S3Info } from '../src/cluster/cluster-info.js';
import { serveHarnessControl } from '../src/cluster/harness-control.js';
import { BROKER_IDS, KafkaCluster } from '../src/cluster/kafka-cluster.js';
import { walSidecarArgs, walSidecarEnv } from '../src/cluster/wal-settings.js';
import { startMoto } from '../src/s3/moto.js';

/**
 * One real cluster (controller + 3 brokers + 3 sidecars) and one real S3 API server (moto) for
 * every e2e file: starting them costs ~15 s of the two cores, and scenarios use their own topics
 * so they do not interfere. Topics named `wal-*` go to the WAL; every other topic is forwarded
 * transparently. A scenario that kills processes starts a cluster of its own.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const moto = await startMoto();
  const s3: Omit<S3Info, 'pid'> = {
    endpoint: moto.endpoint,
    bucket: 'walproxy-e2e',
    prefix: 'wal/',
    walTopicGlob: 'wal-*',
  };
  await moto.createBucket(s3.bucket);
  let cluster: KafkaCluster;
  try {
    cluster = await KafkaCluster.start({
      sidecars: true,
      sidecarArgs: () => walSidecarArgs(s3),
      sidecarEnv: walSidecarEnv(),
    });
  } catch (error) {
    await moto.stop();
    throw error;
  }
  const control = await serveHarnessControl(cluster);
  const info: ClusterInfo = {
    bootstrap: cluster.bootstrap(),
    directBootstrap: cluster.directBootstrap(),
    adminUrls: Object.fromEntries(BROKER_IDS.map((id) => [id, cluster.adminUrl(id)])),
    sidecarLogs: Object.fromEntries(BROKER_IDS.map((id) => [id, cluster.sidecars.get(id)!.logFile])),
    dataDirs: Object.fromEntries(BROKER_IDS.map((id) => [id, cluster.dataDir(id)])),
    kafkaVersion: cluster.version,
    ports: { base: cluster.ports.base },
    s3: { ...s3, pid: moto.pid },
    controlUrl: control.url,
  };
  project.provide('cluster', info);
  return async () => {
    const failed = project.vitest.state.getCountOfFailedTests() > 0;
    await control.close();
    await cluster.stop({ keepLogs: failed || process.env.WALPROXY_KEEP_LOGS === '1' });
    await moto.stop();
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    cluster: ClusterInfo;
  }
}
