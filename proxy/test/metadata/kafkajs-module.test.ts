import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { loadKafkajs, loadRequestQueue } from '../../src/metadata/kafkajs-module.js';

// kafkajs' own request queue, as its connections require it.
const require = createRequire(import.meta.url);
type Queue = {
  pending: unknown[];
  throttledUntil: number;
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
  destroy(): void;
};
const RequestQueue = require('kafkajs/src/network/requestQueue/index.js') as new (options: object) => Queue;

function queue(): Queue {
  const logger = {
    debug: () => undefined,
    warn: () => undefined,
    error: () => undefined,
    info: () => undefined,
  };
  return new RequestQueue({
    maxInFlightRequests: 1,
    requestTimeout: 30_000,
    enforceRequestTimeout: false,
    clientId: 'test',
    broker: '127.0.0.1:9092',
    logger,
  });
}

describe('loadKafkajs', () => {
  it('stops the request queue re-arming a timer with nothing pending (kafkajs #1556): no timer per connection every millisecond', async () => {
    // Given kafkajs loaded as the metadata publisher loads it, and a connection's idle queue
    await loadKafkajs();
    expect(await loadRequestQueue()).toBe(RequestQueue);
    const idle = queue();
    try {
      // When a response is fulfilled (kafkajs then checks the pending requests) with none pending
      idle.checkPendingRequests();
      // Then no timer is armed to check again
      expect(idle.throttleCheckTimeoutId).toBeNull();
    } finally {
      idle.destroy();
    }
  });

  it('still schedules the check for requests a throttle holds', async () => {
    await loadKafkajs();
    // Given a throttled queue holding a request
    const throttled = queue();
    try {
      throttled.throttledUntil = Date.now() + 60_000;
      throttled.pending.push({});
      // When it checks, Then a timer is armed for the throttle's end
      throttled.scheduleCheckPendingRequests();
      expect(throttled.throttleCheckTimeoutId).not.toBeNull();
    } finally {
      throttled.destroy();
    }
  });
});
