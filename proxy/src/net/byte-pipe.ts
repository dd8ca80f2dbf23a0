import type net from 'node:net';
import type { Logger } from '../log.js';
import type { BrokerFence, ControllerTap } from './controller-tap.js';
import type { ListenerCounters } from './counters.js';

export interface BytePipeOptions {
  counters: ListenerCounters;
  log: Logger;
  /** The controller path: the broker's heartbeats are read (and at a stop rewritten) here. */
  fence?: BrokerFence;
}

/**
 * A downstream connection and its upstream with the bytes passed through unread: the KRaft
 * controller path. Nothing there is walproxy's to change, so no frame size applies (a metadata
 * snapshot chunk may be large) and the one thing that matters is that the connection lives and
 * dies with the sidecar — except the broker's heartbeats, which a `fence` reads on the way
 * (ControllerTap: only frame boundaries are tracked, heartbeats held whole) so that a stop can move
 * the broker's leaderships first. Backpressure both ways is the sockets' own: a side
 * is paused while the other side's write buffer is full.
 */
export class BytePipe {
  private closed = false;
  private readonly tap: ControllerTap | undefined;
  private readonly onClosed: Array<() => void> = [];

  constructor(
    private readonly downstream: net.Socket,
    private readonly upstream: net.Socket,
    private readonly options: BytePipeOptions,
  ) {
    const { counters } = options;
    const tap: ControllerTap | undefined = options.fence?.tap((bytes) => {
      counters.bytesToUpstream += bytes.length;
      upstream.write(bytes);
    });
    this.tap = tap;
    const out: Buffer[] = [];
    // Writes the pieces; false when `to`'s buffer is full.
    const forward = (to: net.Socket, pieces: Buffer[]): boolean => {
      let flowing = true;
      for (const piece of pieces) if (!to.write(piece)) flowing = false;
      return flowing;
    };
    downstream.on('data', (chunk: Buffer) => {
      counters.bytesFromDownstream += chunk.length;
      if (tap) tap.pushFromBroker(chunk, out);
      else out.push(chunk);
      for (const piece of out) counters.bytesToUpstream += piece.length;
      if (!forward(upstream, out.splice(0))) downstream.pause();
    });
    upstream.on('data', (chunk: Buffer) => {
      counters.bytesFromUpstream += chunk.length;
      if (tap) tap.pushFromController(chunk, out);
      else out.push(chunk);
      for (const piece of out) counters.bytesToDownstream += piece.length;
      if (!forward(downstream, out.splice(0))) upstream.pause();
    });
    upstream.on('drain', () => downstream.resume());
    downstream.on('drain', () => upstream.resume());
    downstream.on('close', () => this.close('downstream closed'));
    upstream.on('close', () => this.close('upstream closed'));
    downstream.on('error', (error) => this.close(`downstream error: ${error.message}`));
    upstream.on('error', (error) => this.close(`upstream error: ${error.message}`));
  }

  get isClosed(): boolean {
    return this.closed;
  }

  whenClosed(callback: () => void): void {
    if (this.closed) callback();
    else this.onClosed.push(callback);
  }

  /** No request boundaries are known here, so a drain closes at once. */
  stopReading(): void {
    this.close('drained');
  }

  /** Only a frame-aware pipe can hold responses for a filter. */
  get onlyFilterHeld(): boolean {
    return false;
  }

  close(reason: string, level: 'debug' | 'warn' = 'debug'): void {
    if (this.closed) return;
    this.closed = true;
    this.options.log[level]({ reason }, 'connection closed');
    this.tap?.close();
    this.downstream.destroy();
    this.upstream.destroy();
    for (const callback of this.onClosed.splice(0)) callback();
  }
}
