// Whether anything more can join an open WAL object before its linger runs out (issue #13,
// latency; issue #14, object sizes).
//
// A Kafka broker handles one request per connection at a time: it reads a connection's next
// request only after it has answered the current one. An acks=all Produce is answered once the
// followers replicated it, and through the WAL the followers replicate a batch only once its
// object is stored. So a producer connection whose oldest unanswered WAL request is already in
// the open object cannot add anything to that object: its next request waits for the object.
// When every producer that could add to an object is waiting for it, lingering on only delays
// every one of them; the writer seals (or, below break-even, abandons) the object at once.
//
// Who may still add, for one budget group:
// - a connection whose oldest unanswered WAL request has a batch of the group the broker has not
//   confirmed yet (the broker is appending it: it joins within moments);
// - a connection whose oldest unanswered WAL request is acks=1 without durable ack (answered
//   right after the broker's append: the next request follows);
// - a connection with nothing unanswered that sent or was answered within the linger (a
//   producer between two requests), and any acks=0 producer within it.
// A producer never seen yet may arrive at any moment and joins the next object: the price of
// not waiting for strangers.
import type { RequestInfo } from '../net/frame-filter.js';

/** One tentative batch of a request, as the WAL writer's ticket tells it. */
export interface WaitingBatch {
  /** The budget group the batch goes into. */
  readonly group: number;
  /** Not confirmed (appended by the broker) yet, nor refused or dropped. */
  isPending(): boolean;
}

interface UnansweredRequest {
  readonly info: RequestInfo;
  /** Its answer waits for the WAL: acks=all (the followers wait for the object) or durable ack. */
  readonly waitsForTheWal: boolean;
  readonly batches: readonly WaitingBatch[];
  readonly sentAtMs: number;
}

interface ProducerConnection {
  /** WAL requests not answered yet, oldest first: the broker appends and answers in this order. */
  readonly unanswered: UnansweredRequest[];
  lastActiveMs: number;
}

/**
 * A connection unheard of this long is forgotten until it sends again: it went quiet (a closed one
 * is forgotten at once, `closed`). An unanswered request this old is past the timeout the broker
 * answers a Produce by (the request's `timeout`: a producer's `request.timeout.ms`, 30 s by default).
 */
const FORGET_AFTER_MS = 60_000;

export interface ProducerWaitsStats {
  /** Producer connections followed now. */
  connections: number;
}

export class ProducerWaits {
  readonly #connections = new Map<object, ProducerConnection>();
  readonly #byRequest = new WeakMap<RequestInfo, ProducerConnection>();

  get stats(): ProducerWaitsStats {
    return { connections: this.#connections.size };
  }

  /**
   * A Produce request with batches for the WAL went upstream on `connection`; acks=0 requests
   * (no answer) pass `expectsAnswer: false` and only count as activity.
   */
  sent(
    connection: object,
    info: RequestInfo,
    request: { expectsAnswer: boolean; waitsForTheWal: boolean; batches: readonly WaitingBatch[] },
    nowMs: number,
  ): void {
    let c = this.#connections.get(connection);
    if (c === undefined) {
      c = { unanswered: [], lastActiveMs: nowMs };
      this.#connections.set(connection, c);
    }
    c.lastActiveMs = nowMs;
    if (!request.expectsAnswer) return;
    c.unanswered.push({
      info,
      waitsForTheWal: request.waitsForTheWal,
      batches: request.batches,
      sentAtMs: nowMs,
    });
    this.#byRequest.set(info, c);
  }

  /**
   * `connection` closed: whatever it had unanswered never will be, and nothing of it is kept (its
   * requests' batches view its request frames). Without this every producer connection ever seen
   * stayed here, with the frames of the requests it left unanswered.
   */
  closed(connection: object): void {
    const c = this.#connections.get(connection);
    if (c === undefined) return;
    this.#connections.delete(connection);
    for (const r of c.unanswered) this.#byRequest.delete(r.info);
    c.unanswered.length = 0;
  }

  /** The broker answered `info` (the answer is on its way downstream). */
  answered(info: RequestInfo, nowMs: number): void {
    const c = this.#byRequest.get(info);
    if (c === undefined) return;
    this.#byRequest.delete(info);
    const at = c.unanswered.findIndex((r) => r.info === info);
    if (at >= 0) c.unanswered.splice(at, 1);
    c.lastActiveMs = nowMs;
  }

  /**
   * Whether some producer may still add a batch of `group` within `windowMs` (the object's
   * linger): false when every producer followed waits for the WAL with its batches of the group
   * in already.
   */
  mayStillAdd(group: number, nowMs: number, windowMs: number): boolean {
    for (const [key, c] of this.#connections) {
      const oldest = c.unanswered[0];
      if (oldest === undefined) {
        if (nowMs - c.lastActiveMs <= windowMs) return true;
        if (nowMs - c.lastActiveMs > FORGET_AFTER_MS) this.#connections.delete(key);
        continue;
      }
      if (nowMs - oldest.sentAtMs > FORGET_AFTER_MS) {
        // The broker will not answer it any more: nothing of it waits for an object.
        this.closed(key);
        continue;
      }
      if (!oldest.waitsForTheWal) return true;
      if (oldest.batches.some((b) => b.group === group && b.isPending())) return true;
    }
    return false;
  }
}
