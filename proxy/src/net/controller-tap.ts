import {
  ApiKey,
  BROKER_HEARTBEAT_WANT_FENCE_OFFSET,
  type BrokerHeartbeatRequest,
  decodeBrokerHeartbeatRequest,
  decodeBrokerHeartbeatResponse,
  decodeRequestHeader,
  decodeResponseHeader,
} from '@walproxy/shared';
import type { Logger } from '../log.js';

const SIZE_PREFIX_BYTES = 4;
/** The only frames read whole on the controller path are heartbeats and their answers: tiny. */
const MAX_INSPECTED_FRAME_BYTES = 64 * 1024;
/**
 * A size prefix past this is not Kafka framing (a TLS record's first bytes read as 0x1603…, ~370
 * MB): the connection then passes unread for the rest of its life, as the controller path always did.
 */
const MAX_PLAUSIBLE_FRAME_BYTES = 256 * 1024 * 1024;

/**
 * Finds the frame boundaries of one direction of a connection while passing its bytes on as they
 * come: only a frame's first `peekBytes` are held until they are all there, and a frame is held
 * whole only when `wantWhole` asks for it (heartbeats). Everything else — a metadata snapshot
 * chunk of any size included — streams through, so the controller path still needs no frame
 * size limit and buffers nothing of note.
 */
export class FrameScanner {
  /** Bytes at the start of a frame, held until there are enough to decide on it. */
  #head: Buffer | undefined;
  /** Bytes of the current frame still to pass through unread. */
  #remaining = 0;
  #unframed = false;

  constructor(
    private readonly peekBytes: number,
    /** With the frame's first peekBytes (size prefix included): hold it whole? */
    private readonly wantWhole: (head: Buffer) => boolean,
    /** A frame held whole (size prefix included): the bytes to send on instead, or null for none. */
    private readonly onWhole: (frame: Buffer) => Buffer | null,
  ) {}

  /** Between two frames: bytes written now start a frame of their own. */
  get atBoundary(): boolean {
    return !this.#unframed && this.#remaining === 0 && this.#head === undefined;
  }

  /** The stream is not Kafka framing; nothing more is read. */
  get unframed(): boolean {
    return this.#unframed;
  }

  /** Appends to `out` the bytes to send on for `chunk`. */
  push(chunk: Buffer, out: Buffer[]): void {
    if (this.#unframed) {
      out.push(chunk);
      return;
    }
    let bytes = chunk;
    if (this.#head) {
      bytes = Buffer.concat([this.#head, chunk]);
      this.#head = undefined;
    }
    while (bytes.length > 0) {
      if (this.#remaining > 0) {
        const n = Math.min(this.#remaining, bytes.length);
        out.push(n === bytes.length ? bytes : bytes.subarray(0, n));
        this.#remaining -= n;
        bytes = bytes.subarray(n);
        continue;
      }
      if (bytes.length < this.peekBytes) {
        this.#head = Buffer.from(bytes);
        return;
      }
      const size = bytes.readInt32BE(0);
      if (size < this.peekBytes - SIZE_PREFIX_BYTES || size > MAX_PLAUSIBLE_FRAME_BYTES) {
        this.#unframed = true;
        out.push(bytes);
        return;
      }
      const total = SIZE_PREFIX_BYTES + size;
      if (size <= MAX_INSPECTED_FRAME_BYTES && this.wantWhole(bytes)) {
        if (bytes.length < total) {
          this.#head = Buffer.from(bytes);
          return;
        }
        const replacement = this.onWhole(bytes.subarray(0, total));
        if (replacement) out.push(replacement);
        bytes = bytes.subarray(total);
        continue;
      }
      this.#remaining = total;
    }
  }
}

interface Injected {
  apiVersion: number;
}

/**
 * One connection of the controller path, read just enough to see its broker's heartbeats: which
 * broker, which epoch, and — at a stop — to ask the controller to fence it. Requests the sidecar
 * adds go in between two of the broker's frames; their answers are taken out of the stream by
 * correlation id, so the broker sees exactly the conversation it had.
 */
export class ControllerTap {
  readonly fromBroker: FrameScanner;
  readonly fromController: FrameScanner;
  /** Heartbeats on their way to the controller: correlation id → API version. */
  readonly #heartbeatsInFlight = new Map<number, number>();
  readonly #injected = new Map<number, Injected>();
  #queued: Buffer[] = [];
  #closed = false;

  constructor(
    private readonly fence: BrokerFence,
    private readonly writeUpstream: (bytes: Buffer) => void,
  ) {
    this.fromBroker = new FrameScanner(
      SIZE_PREFIX_BYTES + 2,
      (head) => head.readInt16BE(SIZE_PREFIX_BYTES) === ApiKey.BrokerHeartbeat,
      (frame) => this.#heartbeatRequest(frame),
    );
    this.fromController = new FrameScanner(
      SIZE_PREFIX_BYTES + 4,
      (head) => {
        const correlationId = head.readInt32BE(SIZE_PREFIX_BYTES);
        return this.#heartbeatsInFlight.has(correlationId) || this.#injected.has(correlationId);
      },
      (frame) => this.#heartbeatResponse(frame),
    );
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Bytes from the broker: appends what goes to the controller (requests added in between). */
  pushFromBroker(chunk: Buffer, out: Buffer[]): void {
    this.fromBroker.push(chunk, out);
    if (this.#queued.length > 0 && this.fromBroker.atBoundary) out.push(...this.#queued.splice(0));
  }

  pushFromController(chunk: Buffer, out: Buffer[]): void {
    this.fromController.push(chunk, out);
  }

  /** Sends a heartbeat of the sidecar's own (a whole frame with its size prefix), between the broker's frames. */
  inject(frame: Buffer, correlationId: number, apiVersion: number): void {
    this.#injected.set(correlationId, { apiVersion });
    if (this.fromBroker.atBoundary) this.writeUpstream(frame);
    else this.#queued.push(frame);
  }

  close(): void {
    this.#closed = true;
  }

  #heartbeatRequest(frame: Buffer): Buffer {
    const parsed = parseHeartbeatRequest(frame);
    if (!parsed) return frame;
    this.#heartbeatsInFlight.set(parsed.correlationId, parsed.apiVersion);
    return this.fence.heartbeatFromBroker(this, frame, parsed);
  }

  #heartbeatResponse(frame: Buffer): Buffer | null {
    const correlationId = frame.readInt32BE(SIZE_PREFIX_BYTES);
    const injected = this.#injected.get(correlationId);
    const apiVersion = injected ? injected.apiVersion : this.#heartbeatsInFlight.get(correlationId)!;
    this.#injected.delete(correlationId);
    this.#heartbeatsInFlight.delete(correlationId);
    try {
      const body = frame.subarray(SIZE_PREFIX_BYTES);
      const header = decodeResponseHeader(body, 1);
      const response = decodeBrokerHeartbeatResponse(body.subarray(header.headerLength), apiVersion);
      this.fence.heartbeatAnswered(response, injected !== undefined);
    } catch {
      // Not a heartbeat answer walproxy can read: the broker's own is passed on as it came.
    }
    return injected ? null : frame;
  }
}

export interface ParsedHeartbeat {
  correlationId: number;
  apiVersion: number;
  /** Where the request body starts in the frame (size prefix included). */
  bodyAt: number;
  request: BrokerHeartbeatRequest;
}

/** A heartbeat request frame (size prefix included), or undefined when it does not read as one. */
export function parseHeartbeatRequest(frame: Buffer): ParsedHeartbeat | undefined {
  try {
    const withoutSize = frame.subarray(SIZE_PREFIX_BYTES);
    const header = decodeRequestHeader(withoutSize);
    const request = decodeBrokerHeartbeatRequest(
      withoutSize.subarray(header.headerLength),
      header.apiVersion,
    );
    return {
      correlationId: header.correlationId,
      apiVersion: header.apiVersion,
      bodyAt: SIZE_PREFIX_BYTES + header.headerLength,
      request,
    };
  } catch {
    return undefined;
  }
}

export type FenceOutcome =
  | { fenced: true; by: 'sidecar heartbeat' | 'broker heartbeat'; ms: number }
  | { fenced: false; reason: string; ms: number };

/**
 * The controller path is where a sidecar can move its broker's leaderships before it stops
 * serving (issue 12): a broker heartbeat with WantFence set makes the active controller fence the
 * broker — its leaderships go to the other in-sync replicas and it leaves their ISRs, as in a
 * controlled shutdown — and the broker's next heartbeat without it (through the restarted
 * sidecar) unfences it again, after which it catches up and rejoins the ISRs. The broker itself is
 * never told: it keeps running, and a RUNNING broker ignores IsFenced in heartbeat answers.
 *
 * Once fencing is asked for, every heartbeat of the broker's own passing through is sent on with
 * WantFence too, until the sidecar exits, so the broker cannot unfence itself while the sidecar
 * drains.
 */
export class BrokerFence {
  #latest?: { tap: ControllerTap; frame: Buffer; parsed: ParsedHeartbeat };
  #requested = false;
  #fenced = false;
  #onFenced: Array<(by: 'sidecar heartbeat' | 'broker heartbeat') => void> = [];
  #nextCorrelationId = -0x40000000;
  readonly stats = { brokerHeartbeats: 0, heartbeatsRewritten: 0, fenceRefusals: 0 };

  constructor(private readonly log: Logger) {}

  /** The broker's id and epoch from its last heartbeat, if one went through. */
  get broker(): { id: number; epoch: bigint } | undefined {
    const r = this.#latest?.parsed.request;
    return r ? { id: r.brokerId, epoch: r.brokerEpoch } : undefined;
  }

  tap(writeUpstream: (bytes: Buffer) => void): ControllerTap {
    return new ControllerTap(this, writeUpstream);
  }

  /** Called for each heartbeat the broker sends; returns the bytes to send on. */
  heartbeatFromBroker(tap: ControllerTap, frame: Buffer, parsed: ParsedHeartbeat): Buffer {
    this.stats.brokerHeartbeats++;
    this.#latest = { tap, frame: Buffer.from(frame), parsed };
    const { wantFence, wantShutDown } = parsed.request;
    // A broker shutting down (controlled shutdown) is left to it: WantFence would turn that into
    // an immediate shutdown.
    if (!this.#requested || wantFence || wantShutDown) return frame;
    this.stats.heartbeatsRewritten++;
    const rewritten = Buffer.from(frame);
    rewritten[parsed.bodyAt + BROKER_HEARTBEAT_WANT_FENCE_OFFSET] = 1;
    return rewritten;
  }

  heartbeatAnswered(response: { errorCode: number; isFenced: boolean }, sidecars: boolean): void {
    if (!this.#requested || this.#fenced) return;
    if (response.errorCode !== 0) {
      // NOT_CONTROLLER (the controller moved), STALE_BROKER_EPOCH…: the broker's own next
      // heartbeat, rewritten, goes where it must.
      if (sidecars) this.stats.fenceRefusals++;
      this.log.debug({ errorCode: response.errorCode, sidecars }, 'fencing heartbeat refused');
      return;
    }
    if (!response.isFenced) return;
    this.#fenced = true;
    for (const wake of this.#onFenced.splice(0)) wake(sidecars ? 'sidecar heartbeat' : 'broker heartbeat');
  }

  /**
   * Asks the controller to fence the broker now, with a heartbeat of the broker's own shape on the
   * connection its heartbeats take, and resolves once an answer says it is fenced, or after
   * `timeoutMs` (the broker's own next heartbeat, rewritten, also asks).
   */
  async fence(timeoutMs: number): Promise<FenceOutcome> {
    this.#requested = true;
    const begun = performance.now();
    const ms = () => Math.round(performance.now() - begun);
    const latest = this.#latest;
    if (!latest || latest.tap.closed) {
      // The broker is gone already (a pod's broker stops before its sidecar) or has not
      // registered: nothing to move.
      return { fenced: false, reason: 'no heartbeat from the broker on an open connection', ms: ms() };
    }
    const fenced = new Promise<'sidecar heartbeat' | 'broker heartbeat'>((resolve) =>
      this.#onFenced.push(resolve),
    );
    const correlationId = this.#nextCorrelationId++;
    const frame = Buffer.from(latest.frame);
    frame.writeInt32BE(correlationId, SIZE_PREFIX_BYTES + 4);
    frame[latest.parsed.bodyAt + BROKER_HEARTBEAT_WANT_FENCE_OFFSET] = 1;
    latest.tap.inject(frame, correlationId, latest.parsed.apiVersion);
    let timer: NodeJS.Timeout | undefined;
    const by = await Promise.race([
      fenced,
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    if (by) return { fenced: true, by, ms: ms() };
    return { fenced: false, reason: `no answer saying fenced within ${timeoutMs} ms`, ms: ms() };
  }
}
