import type { SidecarCounters } from './kafka-cluster.js';

/** What e2e files get from the shared cluster (serializable: it crosses into test workers). */
export interface ClusterInfo {
  bootstrap: string;
  directBootstrap: string;
  adminUrls: Record<number, string>;
  sidecarLogs: Record<number, string>;
  kafkaVersion: string;
  ports: { base: number };
  /** Each broker's log.dirs, to compare replicas and WAL objects with what the brokers stored. */
  dataDirs: Record<number, string>;
  /** The real S3 API server the sidecars write WAL objects to. */
  s3: S3Info;
}

export interface S3Info {
  endpoint: string;
  bucket: string;
  /** Key prefix of the WAL objects in the bucket. */
  prefix: string;
  /** moto's pid: SIGSTOP/SIGCONT simulate an outage without losing its in-memory objects. */
  pid: number;
  /** Topics matching this glob go to the WAL on the shared cluster. */
  walTopicGlob: string;
}

export async function sidecarCounters(info: ClusterInfo, brokerId: number): Promise<SidecarCounters> {
  const response = await fetch(`${info.adminUrls[brokerId]}/counters`);
  if (!response.ok) throw new Error(`sidecar ${brokerId} counters: HTTP ${response.status}`);
  return (await response.json()) as SidecarCounters;
}
