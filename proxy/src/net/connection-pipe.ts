import type net from 'node:net';
import { ApiKey, apiKeyInfo, ProtocolError, peekProduceAcks, peekRequestKey } from '@walproxy/shared';
import type { Logger } from '../log.js';
import type { ListenerCounters } from './counters.js';
import type { FilterChain } from './filter-chain.js';
import {
  FRAME_SIZE_PREFIX_BYTES,
  FrameDecoder,
  FrameTooLargeError,
  InvalidFrameSizeError,
} from './frame-decoder.js';
import type { FilterConnection, FrameObserver, RequestDecision, RequestInfo } from './frame-filter.js';

/** Smallest request after the size prefix: header v1's api key, version, correlation id, client id length. */
const MIN_REQUEST_BYTES = 10;
/** Smallest response after the size prefix: header v0's correlation id. */
const MIN_RESPONSE_BYTES = 4;
/**
 * A response at least this large that no filter reads, with nothing waiting ahead of it, goes to
 * the downstream as its bytes arrive instead of being assembled whole first: a consumer's Fetch
 * response may be `fetch.max.bytes` (50 MiB by default), and whole it would cost that much memory
 * per consumer fetching (issue 12, case 10) and a copy of every byte.
 */
export const STREAM_RESPONSES_FROM_BYTES = 256 * 1024;
/**
 * The same for requests: one at least this large whose API key no filter claims, with no request
 * waiting for a decision ahead of it, goes upstream as its bytes arrive. A producer's Produce
 * request (up to `max.request.size`, 1 MiB by default) spans several socket reads; assembling it
 * first cost a copy of every produced byte on a sidecar without the WAL (issue #13, pass-through).
 */
export const STREAM_REQUESTS_FROM_BYTES = 64 * 1024;
/** At most this much of a request's head is read to find its key and (Produce) acks before streaming it. */
const STREAM_REQUEST_HEAD_BYTES = 1024;

export interface PipeOptions {
  maxFrameBytes: number;
  /** Pause reading one side while the other side has more than this many bytes queued. */
  maxBufferedBytes: number;
  /** The listener's filters (one chain for all its connections). */
  chain: FilterChain;
  observer?: FrameObserver;
  counters: ListenerCounters;
  log: Logger;
}

/** A response slot, in request order. `output` is set when the response is known. */
interface Slot {
  readonly info: RequestInfo;
  output?: Buffer;
  pending?: Promise<Buffer>;
}

/** A request of the sidecar's own (FilterConnection.sendUpstream): its response is the caller's. */
interface OwnRequest {
  readonly own: true;
  readonly correlationId: number;
  readonly resolve: (frame: Buffer) => void;
  readonly reject: (error: Error) => void;
}

/** A request whose filter decides asynchronously, or one that arrived behind such a request. */
interface Undecided {
  readonly slot: Slot;
  /** The request frame's size: frames waiting here count against maxBufferedBytes. */
  readonly bytes: number;
  decision?: RequestDecision;
}

/**
 * One downstream connection (client or follower broker) and its upstream connection.
 *
 * Requests are forwarded as their original bytes the moment they are complete; the pipe keeps
 * the (api key, version, correlation id) of each request that has a response, in order, to pair
 * it with the response (Kafka answers in request order on a connection) and to let filters read
 * it. Responses leave in request order even when a filter answers locally or holds one. A filter
 * may also decide a request asynchronously (a zone-local produce waits for a store write): later
 * requests are still read and decided at once, but forwarded only after it, in arrival order, so
 * the upstream sees the downstream's order (per-partition order, idempotent sequence numbers).
 * Backpressure both ways: a side is paused while the other side's write queue is over the bound,
 * so memory per connection stays within about maxBufferedBytes plus one frame per direction.
 */
export class ConnectionPipe {
  private readonly requestDecoder: FrameDecoder;
  private readonly responseDecoder: FrameDecoder;
  /** Every request that has a response, in order: what goes downstream next is slots[0]. */
  private readonly slots: Slot[] = [];
  /** The subset still waiting for the upstream's response, in order, with the sidecar's own. */
  private readonly awaitingUpstream: Array<Slot | OwnRequest> = [];
  /** Requests not forwarded yet because a decision before them (or theirs) is still pending, in order. */
  private readonly undecided: Undecided[] = [];
  private undecidedBytes = 0;
  private closed = false;
  private draining = false;
  /** Bytes of a streamed response (slots[0]'s) still to pass downstream as they arrive. */
  private streamingRemaining = 0;
  /** Bytes of a streamed request still to pass upstream as they arrive. */
  private requestStreamingRemaining = 0;
  private readonly onClosed: Array<() => void> = [];
  private readonly filterConnection: FilterConnection;

  constructor(
    private readonly downstream: net.Socket,
    private readonly upstream: net.Socket,
    private readonly options: PipeOptions,
  ) {
    // The decoders' minimum is the size field's value, which excludes the prefix. A response too
    // short for a correlation id (a raw SASL token, say) is then a protocol error that closes
    // this connection, never an exception that escapes the data handler.
    this.requestDecoder = new FrameDecoder(options.maxFrameBytes, MIN_REQUEST_BYTES);
    this.responseDecoder = new FrameDecoder(options.maxFrameBytes, MIN_RESPONSE_BYTES);
    this.filterConnection = {
      log: options.log,
      remoteAddress: downstream.remoteAddress,
      sendUpstream: (frame, correlationId) => this.sendOwnRequest(frame, correlationId),
    };

    downstream.on('data', (chunk: Buffer) => this.onDownstreamData(chunk));
    upstream.on('data', (chunk: Buffer) => this.onUpstreamData(chunk));
    downstream.on('drain', () => this.upstream.resume());
    upstream.on('drain', () => {
      // While draining, reading resumes only to finish a request already half sent upstream.
      if (!this.draining || this.requestStreamingRemaining > 0) this.downstream.resume();
    });
    // Closing either side closes the other.
    downstream.on('close', () => this.close('downstream closed'));
    upstream.on('close', () => this.close('upstream closed'));
    downstream.on('error', (error) => this.close(`downstream error: ${error.message}`));
    upstream.on('error', (error) => this.close(`upstream error: ${error.message}`));
  }

  /** Requests forwarded whose responses have not yet been written downstream. */
  get inFlight(): number {
    return this.slots.length;
  }

  /** The API keys of those requests, oldest first. */
  get inFlightApiKeys(): number[] {
    return this.slots.map((slot) => slot.info.apiKey);
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /**
   * The upstream has answered every request, and what is left is held by a filter (a durable ack
   * waiting for the store, a leader-side hold, a follower-side fill): nothing the broker still owes.
   */
  get onlyFilterHeld(): boolean {
    return (
      this.streamingRemaining === 0 &&
      this.awaitingUpstream.length === 0 &&
      this.slots.some((slot) => slot.output === undefined)
    );
  }

  /** FilterConnection.sendUpstream: written now, after every request already forwarded. */
  private sendOwnRequest(frame: Buffer, correlationId: number): Promise<Buffer> {
    if (this.closed) return Promise.reject(new Error('connection closed'));
    // Never inside a request being streamed upstream: its bytes would be cut in two.
    if (this.requestStreamingRemaining > 0) return Promise.reject(new Error('a request is streaming'));
    return new Promise<Buffer>((resolve, reject) => {
      this.awaitingUpstream.push({ own: true, correlationId, resolve, reject });
      this.options.counters.bytesToUpstream += frame.length;
      this.upstream.write(frame);
    });
  }

  whenClosed(callback: () => void): void {
    if (this.closed) callback();
    else this.onClosed.push(callback);
  }

  /** Stops reading new requests; responses still due are delivered. */
  stopReading(): void {
    this.draining = true;
    // A request half sent upstream is read to its end first (onDownstreamData pauses then).
    if (this.requestStreamingRemaining > 0) return;
    this.downstream.pause();
    if (this.slots.length === 0) this.close('drained', 'debug', true);
  }

  /**
   * Closes both sides. `graceful` lets the responses already written reach the downstream first
   * (end, not destroy): used when a drained connection closes.
   */
  close(reason: string, level: 'debug' | 'warn' = 'debug', graceful = false): void {
    if (this.closed) return;
    this.closed = true;
    this.options.log[level]({ reason, inFlight: this.slots.length }, 'connection closed');
    this.upstream.destroy();
    for (const waiting of this.awaitingUpstream.splice(0)) {
      if ('own' in waiting) waiting.reject(new Error(`connection closed (${reason})`));
    }
    // What the filters keep for this connection must not outlive it.
    this.options.chain.onClose(this.filterConnection);
    const notify = () => {
      for (const callback of this.onClosed.splice(0)) callback();
    };
    if (graceful && this.downstream.writable) {
      // Closed once the responses are handed to the kernel ('finish'), not once the peer answers
      // our FIN: a drain waits for the first, and a peer may take seconds for the second.
      this.downstream.end(notify);
      this.downstream.once('close', notify);
      // A peer that never answers our FIN must not keep the socket forever.
      setTimeout(() => this.downstream.destroy(), 5_000).unref();
    } else {
      this.downstream.destroy();
      notify();
    }
  }

  private protocolError(direction: 'request' | 'response', error: unknown, frameSize?: number): void {
    this.options.counters.closedForProtocolError++;
    const detail = error instanceof Error ? error.message : String(error);
    const code = error instanceof ProtocolError ? error.code : undefined;
    this.options.log.warn(
      { direction, frameSize, code, error: detail },
      `closing connection: malformed ${direction} (${detail})`,
    );
    this.close(`malformed ${direction}`, 'debug');
  }

  private onDownstreamData(chunk: Buffer): void {
    if (this.closed) return;
    this.options.counters.bytesFromDownstream += chunk.length;
    let data = chunk;
    if (this.requestStreamingRemaining > 0) {
      const n = Math.min(this.requestStreamingRemaining, data.length);
      this.streamUp(n === data.length ? data : data.subarray(0, n));
      this.requestStreamingRemaining -= n;
      if (this.requestStreamingRemaining > 0) return;
      data = data.subarray(n);
      if (this.draining) {
        // The request that was half sent is whole now; what follows is not read while draining.
        this.downstream.pause();
        if (this.slots.length === 0) this.close('drained', 'debug', true);
        return;
      }
      if (data.length === 0) return;
    }
    let frames: Buffer[];
    try {
      frames = this.requestDecoder.push(data);
    } catch (error) {
      this.protocolError('request', error, sizeOf(error));
      return;
    }
    if (frames.length > 0) {
      this.upstream.cork();
      try {
        for (const frame of frames) {
          if (!this.onRequestFrame(frame)) return;
        }
      } finally {
        if (!this.closed) this.upstream.uncork();
      }
    }
    this.maybeStreamRequest();
    // Requests waiting for a decision hold their frames: they count against the bound as well.
    if (
      this.upstream.writableLength > this.options.maxBufferedBytes ||
      this.undecidedBytes > this.options.maxBufferedBytes
    )
      this.downstream.pause();
    if (frames.length > 0) this.flush();
  }

  /**
   * Streams the request being assembled when it is large, no filter or observer reads it, and
   * every request before it has gone upstream: what is held of it goes now, the rest as it
   * arrives. A head this cannot read (too short yet, or malformed) leaves the request to the
   * whole-frame path, which judges it as it judges every other request.
   */
  private maybeStreamRequest(): void {
    if (this.closed || this.draining || this.options.observer?.request || this.undecided.length > 0) return;
    const partial = this.requestDecoder.partial;
    if (!partial || partial.expected < STREAM_REQUESTS_FROM_BYTES) return;
    if (partial.held < FRAME_SIZE_PREFIX_BYTES + MIN_REQUEST_BYTES) return;
    const head = this.requestDecoder
      .peekHeld(Math.min(partial.held, STREAM_REQUEST_HEAD_BYTES))
      .subarray(FRAME_SIZE_PREFIX_BYTES);
    let info: RequestInfo;
    let expectResponse: boolean;
    try {
      info = peekRequestKey(head);
      if (info.apiKey < 0 || info.apiVersion < 0 || this.options.chain.apiKeys.has(info.apiKey)) return;
      // KIP-98/Kroxylicious: acks=0 Produce has no response (as in onRequestFrame).
      expectResponse = info.apiKey !== ApiKey.Produce || peekProduceAcks(head) !== 0;
    } catch {
      return;
    }
    const requests = this.options.counters.requests;
    const name = `${apiKeyInfo(info.apiKey)?.name ?? `key-${info.apiKey}`} v${info.apiVersion}`;
    requests[name] = (requests[name] ?? 0) + 1;
    if (expectResponse) {
      // Every request before it is upstream already (nothing undecided): its slot is next in order.
      const slot: Slot = { info };
      this.slots.push(slot);
      this.awaitingUpstream.push(slot);
    }
    this.options.counters.requestsStreamed++;
    this.requestStreamingRemaining = partial.expected - partial.held;
    const held = this.requestDecoder.takePartial();
    if (held.length > 1) this.upstream.cork();
    for (const piece of held) this.streamUp(piece);
    if (held.length > 1) this.upstream.uncork();
  }

  private streamUp(piece: Buffer): void {
    this.options.counters.bytesToUpstream += piece.length;
    this.upstream.write(piece);
    if (this.upstream.writableLength > this.options.maxBufferedBytes) this.downstream.pause();
  }

  /** Returns false when the connection was closed. */
  private onRequestFrame(frame: Buffer): boolean {
    const requests = this.options.counters.requests;
    try {
      const key = peekRequestKey(frame.subarray(FRAME_SIZE_PREFIX_BYTES));
      if (key.apiKey < 0 || key.apiVersion < 0) {
        throw new Error(`request header has api key ${key.apiKey} version ${key.apiVersion}`);
      }
      const info: RequestInfo = key;
      this.options.observer?.request?.(info, frame);
      const name = `${apiKeyInfo(key.apiKey)?.name ?? `key-${key.apiKey}`} v${key.apiVersion}`;
      requests[name] = (requests[name] ?? 0) + 1;
      const decision = this.options.chain.onRequest(info, frame, this.filterConnection);
      // The slot is taken now, in arrival order, whatever the decision turns out to be.
      const slot: Slot = { info };
      this.slots.push(slot);
      if (!(decision instanceof Promise) && this.undecided.length === 0) {
        this.apply(slot, decision);
        return true;
      }
      // A decision still to come, or one behind it: forwarded in arrival order once known.
      const queued: Undecided = { slot, bytes: frame.length };
      if (decision instanceof Promise) {
        decision.then(
          (settled) => {
            queued.decision = settled;
            this.applyDecided();
          },
          (error) => {
            if (!this.closed) this.protocolError('request', error, frame.length - FRAME_SIZE_PREFIX_BYTES);
          },
        );
      } else {
        queued.decision = decision;
      }
      this.undecided.push(queued);
      this.undecidedBytes += queued.bytes;
      return true;
    } catch (error) {
      this.protocolError('request', error, frame.length - FRAME_SIZE_PREFIX_BYTES);
      return false;
    }
  }

  /** Carries out one request's decision; its slot is already in `slots`, in arrival order. */
  private apply(slot: Slot, decision: RequestDecision): void {
    if (decision.action === 'respond') {
      slot.output = decision.response;
      return;
    }
    if (decision.expectResponse) this.awaitingUpstream.push(slot);
    else this.slots.splice(this.slots.lastIndexOf(slot), 1);
    this.options.counters.bytesToUpstream += decision.frame.length;
    this.upstream.write(decision.frame);
  }

  /** Applies the queued decisions that are known, oldest first, up to the first still pending. */
  private applyDecided(): void {
    if (this.closed) return;
    this.upstream.cork();
    try {
      while (this.undecided[0]?.decision !== undefined) {
        const queued = this.undecided.shift()!;
        this.undecidedBytes -= queued.bytes;
        this.apply(queued.slot, queued.decision!);
      }
    } finally {
      this.upstream.uncork();
    }
    if (this.upstream.writableLength > this.options.maxBufferedBytes) this.downstream.pause();
    else if (!this.draining && this.undecidedBytes <= this.options.maxBufferedBytes) this.downstream.resume();
    this.flush();
  }

  private onUpstreamData(chunk: Buffer): void {
    if (this.closed) return;
    this.options.counters.bytesFromUpstream += chunk.length;
    let data = chunk;
    if (this.streamingRemaining > 0) {
      const n = Math.min(this.streamingRemaining, data.length);
      this.streamOut(n === data.length ? data : data.subarray(0, n));
      this.streamingRemaining -= n;
      data = data.subarray(n);
      if (this.streamingRemaining > 0) return;
      // The streamed response is complete: its slot is done.
      this.slots.shift();
      if (data.length === 0) {
        this.flush();
        return;
      }
    }
    let frames: Buffer[];
    try {
      frames = this.responseDecoder.push(data);
    } catch (error) {
      this.protocolError('response', error, sizeOf(error));
      return;
    }
    for (const frame of frames) {
      const waiting = this.awaitingUpstream.shift();
      const correlationId = frame.readInt32BE(FRAME_SIZE_PREFIX_BYTES);
      const expected =
        waiting === undefined
          ? undefined
          : 'own' in waiting
            ? waiting.correlationId
            : waiting.info.correlationId;
      if (waiting === undefined || expected !== correlationId) {
        this.protocolError(
          'response',
          new Error(
            `response correlation id ${correlationId} does not match the oldest request (${expected ?? 'none'})`,
          ),
        );
        return;
      }
      if ('own' in waiting) {
        waiting.resolve(frame);
        continue;
      }
      const slot = waiting;
      try {
        this.options.observer?.response?.(slot.info, frame);
        const out = this.options.chain.onResponse(slot.info, frame);
        if (out instanceof Promise) {
          slot.pending = out;
          out.then(
            (buffer) => {
              slot.output = buffer;
              this.flush();
            },
            (error) => this.protocolError('response', error),
          );
        } else {
          slot.output = out;
        }
      } catch (error) {
        this.protocolError('response', error, frame.length - FRAME_SIZE_PREFIX_BYTES);
        return;
      }
    }
    this.flush();
    this.maybeStartStreaming();
  }

  /**
   * Streams the response being assembled when it is large, no filter or observer reads it, and it
   * is next to go downstream: what is held of it goes now, the rest as it arrives.
   */
  private maybeStartStreaming(): void {
    if (this.closed) return;
    const partial = this.responseDecoder.partial;
    if (!partial || partial.expected < STREAM_RESPONSES_FROM_BYTES) return;
    if (partial.held < FRAME_SIZE_PREFIX_BYTES + 4) return;
    const slot = this.awaitingUpstream[0];
    if (
      !slot ||
      'own' in slot ||
      this.slots[0] !== slot ||
      this.options.chain.readsResponse(slot.info.apiKey) ||
      this.options.observer?.response
    )
      return;
    // A mismatch is reported by the whole-frame path, with the frame.
    if (this.responseDecoder.peekHeld(8).readInt32BE(FRAME_SIZE_PREFIX_BYTES) !== slot.info.correlationId)
      return;
    this.awaitingUpstream.shift();
    this.streamingRemaining = partial.expected - partial.held;
    this.options.counters.responsesStreamed++;
    for (const piece of this.responseDecoder.takePartial()) this.streamOut(piece);
  }

  private streamOut(piece: Buffer): void {
    this.options.counters.bytesToDownstream += piece.length;
    this.downstream.write(piece);
    if (this.downstream.writableLength > this.options.maxBufferedBytes) this.upstream.pause();
  }

  /** Writes every response that is next in order and known. */
  private flush(): void {
    if (this.closed) return;
    if (this.slots[0]?.output !== undefined) {
      this.downstream.cork();
      while (this.slots[0]?.output !== undefined) {
        const output = this.slots.shift()!.output!;
        this.options.counters.bytesToDownstream += output.length;
        this.downstream.write(output);
      }
      this.downstream.uncork();
      if (this.downstream.writableLength > this.options.maxBufferedBytes) this.upstream.pause();
    }
    // Also after a streamed response, which leaves no output here: it may have been the last due.
    if (this.draining && this.slots.length === 0 && this.requestStreamingRemaining === 0)
      this.close('drained', 'debug', true);
  }
}

function sizeOf(error: unknown): number | undefined {
  if (error instanceof FrameTooLargeError || error instanceof InvalidFrameSizeError) return error.size;
  return undefined;
}
