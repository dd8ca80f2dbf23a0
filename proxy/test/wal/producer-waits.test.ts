import { describe, expect, it } from 'vitest';
import type { RequestInfo } from '../../src/net/frame-filter.js';
import { ProducerWaits, type WaitingBatch } from '../../src/wal/producer-waits.js';

const GROUP = 25;
const LINGER = 20;

let correlationId = 0;
const request = (): RequestInfo => ({ apiKey: 0, apiVersion: 9, correlationId: ++correlationId });

/** A batch whose confirmation the test decides. */
function batch(group = GROUP): WaitingBatch & { confirm(): void } {
  let pending = true;
  return {
    group,
    isPending: () => pending,
    confirm: () => {
      pending = false;
    },
  };
}

const acksAll = (batches: WaitingBatch[]) => ({ expectsAnswer: true, waitsForTheWal: true, batches });

describe('ProducerWaits', () => {
  it('says nobody may add once the only producer waits with its batches confirmed', () => {
    const waits = new ProducerWaits();
    const producer = {};
    const b = batch();
    // Given an acks=all request whose batch the broker has not confirmed yet
    waits.sent(producer, request(), acksAll([b]), 0);
    // Then it is still coming
    expect(waits.mayStillAdd(GROUP, 1, LINGER)).toBe(true);
    // When the broker confirms it
    b.confirm();
    // Then the producer waits for the object and nobody else may add
    expect(waits.mayStillAdd(GROUP, 2, LINGER)).toBe(false);
  });

  it('counts a later request queued behind the waiting one as unable to add (the broker has not read it)', () => {
    const waits = new ProducerWaits();
    const producer = {};
    const first = batch();
    waits.sent(producer, request(), acksAll([first]), 0);
    waits.sent(producer, request(), acksAll([batch()]), 1);
    first.confirm();
    expect(waits.mayStillAdd(GROUP, 2, LINGER)).toBe(false);
  });

  it('expects the next request of a producer that was just answered, within the linger only', () => {
    const waits = new ProducerWaits();
    const producer = {};
    const b = batch();
    const info = request();
    waits.sent(producer, info, acksAll([b]), 0);
    b.confirm();
    // When its answer passes at 10
    waits.answered(info, 10);
    // Then it may come back while the linger lasts, and not after
    expect(waits.mayStillAdd(GROUP, 10 + LINGER, LINGER)).toBe(true);
    expect(waits.mayStillAdd(GROUP, 11 + LINGER, LINGER)).toBe(false);
  });

  it('waits for producers whose answers do not wait for the WAL (acks=1) and for acks=0 producers', () => {
    const acksOne = new ProducerWaits();
    const b = batch();
    acksOne.sent({}, request(), { expectsAnswer: true, waitsForTheWal: false, batches: [b] }, 0);
    b.confirm();
    expect(acksOne.mayStillAdd(GROUP, 1, LINGER)).toBe(true);

    const acksZero = new ProducerWaits();
    acksZero.sent({}, request(), { expectsAnswer: false, waitsForTheWal: false, batches: [] }, 0);
    expect(acksZero.mayStillAdd(GROUP, LINGER, LINGER)).toBe(true);
    expect(acksZero.mayStillAdd(GROUP, LINGER + 1, LINGER)).toBe(false);
  });

  it('judges each budget group apart: a batch still coming in another group does not hold this one', () => {
    const waits = new ProducerWaits();
    const here = batch(GROUP);
    const elsewhere = batch(GROUP * 2);
    waits.sent({}, request(), acksAll([here, elsewhere]), 0);
    here.confirm();
    expect(waits.mayStillAdd(GROUP, 1, LINGER)).toBe(false);
    expect(waits.mayStillAdd(GROUP * 2, 1, LINGER)).toBe(true);
  });

  it('needs every producer waiting: one still appending keeps the object open', () => {
    const waits = new ProducerWaits();
    const a = batch();
    const b = batch();
    waits.sent({}, request(), acksAll([a]), 0);
    waits.sent({}, request(), acksAll([b]), 0);
    a.confirm();
    expect(waits.mayStillAdd(GROUP, 1, LINGER)).toBe(true);
    b.confirm();
    expect(waits.mayStillAdd(GROUP, 1, LINGER)).toBe(false);
  });

  it('forgets a closed connection at once, with the requests it left unanswered', () => {
    const waits = new ProducerWaits();
    const gone = {};
    const stays = {};
    const left = request();
    waits.sent(gone, left, acksAll([batch()]), 0);
    waits.sent(stays, request(), acksAll([batch()]), 0);
    // When the first connection closes with its request unanswered
    waits.closed(gone);
    // Then only the other one is followed, and the closed one's batch no longer holds objects
    expect(waits.stats.connections).toBe(1);
    waits.closed(stays);
    expect(waits.stats.connections).toBe(0);
    expect(waits.mayStillAdd(GROUP, 1, LINGER)).toBe(false);
    // An answer that still turns up for it (the pipe is gone) changes nothing
    waits.answered(left, 2);
    expect(waits.stats.connections).toBe(0);
  });

  it('forgets connections that closed with a request unanswered, and quiet ones', () => {
    const waits = new ProducerWaits();
    waits.sent({}, request(), acksAll([batch()]), 0);
    waits.sent({}, request(), { expectsAnswer: false, waitsForTheWal: false, batches: [] }, 0);
    expect(waits.stats.connections).toBe(2);
    // A batch never confirmed (its connection closed): after a minute it no longer holds objects
    expect(waits.mayStillAdd(GROUP, 60_001, LINGER)).toBe(false);
    expect(waits.stats.connections).toBe(0);
  });
});
