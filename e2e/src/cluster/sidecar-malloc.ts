/**
 * glibc malloc settings the image and the chart give the sidecar (deploy/docker/Dockerfile,
 * deploy/helm/walproxy/templates/_sidecar.tpl; docs/deploy.md, "Memory"); the harness starts
 * every sidecar with them. A fixed mmap
 * threshold: by default glibc raises it to the size of each large block freed, so after the first
 * WAL object's buffers (hundreds of KB) every later one comes from the heap, whose freed middle
 * the kernel never gets back; RSS then creeps with the traffic's high-water marks. Two arenas:
 * the default (8 per core) only multiplies that.
 */
export const SIDECAR_MALLOC_ENV: Record<string, string> = {
  MALLOC_MMAP_THRESHOLD_: '131072',
  MALLOC_ARENA_MAX: '2',
};
