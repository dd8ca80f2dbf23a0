/// <reference path="./kafkajs-internals.d.ts" />
import type * as Kafkajs from 'kafkajs';

/**
 * kafkajs, loaded on first use (the sidecar must not evaluate it before its listeners open).
 * kafkajs is CommonJS: Node's import() names its exports, but the chunk esbuild's code splitting
 * makes of it exports only `default` (module.exports), so take that when it is there — named
 * imports from the chunk were undefined, and the metadata publisher never connected.
 */
export async function loadKafkajs(): Promise<typeof Kafkajs> {
  const loaded = (await import('kafkajs')) as typeof Kafkajs & { default?: typeof Kafkajs };
  await stopIdleRequestQueueLoop();
  return loaded.default ?? loaded;
}

/** What the fix below touches of kafkajs' internal RequestQueue (src/network/requestQueue). */
export interface RequestQueueClass {
  prototype: {
    pending: unknown[];
    scheduleCheckPendingRequests(this: { pending: unknown[] }): void;
  };
}

/** kafkajs' own RequestQueue class: the same module its connections use (one per file, bundled or not). */
export async function loadRequestQueue(): Promise<RequestQueueClass> {
  const loaded = (await import('kafkajs/src/network/requestQueue/index.js')) as RequestQueueClass & {
    default?: RequestQueueClass;
  };
  return loaded.default ?? loaded;
}

let idleLoopStopped = false;

/**
 * kafkajs 2.2.4 (the last release; the fix, tulios/kafkajs#1667, is unmerged) re-arms a timer in
 * every connection's request queue after each check, also with nothing pending and no throttle,
 * with a negative delay (issues #1556, #1704): each connection of the metadata publisher ran a
 * timer every millisecond for good — 3–5 % of a WAL sidecar's CPU in issue #13's profiles, also
 * with no traffic. With nothing pending there is nothing to check: a request pushed later is sent
 * at once or queued, and queuing it schedules the check; a throttle only delays pending requests.
 */
async function stopIdleRequestQueueLoop(): Promise<void> {
  if (idleLoopStopped) return;
  idleLoopStopped = true;
  const RequestQueue = await loadRequestQueue();
  const schedule = RequestQueue.prototype.scheduleCheckPendingRequests;
  RequestQueue.prototype.scheduleCheckPendingRequests = function (this: { pending: unknown[] }) {
    if (this.pending.length === 0) return;
    schedule.call(this);
  };
}
