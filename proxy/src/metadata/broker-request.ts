import net from 'node:net';
import { decodeResponseHeader, encodeRequestHeader, responseHeaderVersion } from '@walproxy/shared';
import { FRAME_SIZE_PREFIX_BYTES, FrameDecoder } from '../net/frame-decoder.js';
import type { HostPort } from '../net/proxy-listener.js';

/**
 * Sends one request to a broker on a fresh connection and returns the response body (the frame
 * after its header). For the sidecar's own low-rate questions to its local broker (topic ids);
 * not for data traffic.
 */
export async function brokerRequest(
  broker: HostPort,
  apiKey: number,
  apiVersion: number,
  body: Buffer,
  { timeoutMs = 5_000, clientId = 'walproxy' }: { timeoutMs?: number; clientId?: string } = {},
): Promise<Buffer> {
  const header = encodeRequestHeader({ apiKey, apiVersion, correlationId: 1, clientId });
  const size = Buffer.allocUnsafe(FRAME_SIZE_PREFIX_BYTES);
  size.writeInt32BE(header.length + body.length, 0);
  const responseHeaderVersionOfApi = responseHeaderVersion(apiKey, apiVersion);
  if (responseHeaderVersionOfApi === undefined) throw new Error(`unknown API key ${apiKey}`);
  return new Promise((resolve, reject) => {
    const socket = net.connect(broker);
    const decoder = new FrameDecoder(256 * 1024 * 1024);
    const fail = (error: Error) => {
      socket.destroy();
      reject(error);
    };
    socket.setTimeout(timeoutMs, () =>
      fail(new Error(`no answer from ${broker.host}:${broker.port} in ${timeoutMs} ms`)),
    );
    socket.once('error', fail);
    socket.once('connect', () => socket.end(Buffer.concat([size, header, body])));
    socket.on('data', (chunk: Buffer) => {
      let frames: Buffer[];
      try {
        frames = decoder.push(chunk);
      } catch (error) {
        fail(error as Error);
        return;
      }
      const frame = frames[0];
      if (!frame) return;
      socket.destroy();
      const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
      const { headerLength } = decodeResponseHeader(payload, responseHeaderVersionOfApi);
      resolve(payload.subarray(headerLength));
    });
    socket.once('close', () =>
      reject(new Error(`${broker.host}:${broker.port} closed the connection without answering`)),
    );
  });
}
