import net from 'node:net';
import { FrameDecoder } from '../../src/net/frame-decoder.js';

/**
 * A broker stand-in for the TLS tests: answers every request frame (header v1 with a null client
 * id, as `echoRequest` builds it) with its payload, as a response carrying the same correlation id.
 */
export async function startEchoBroker(): Promise<{
  port: number;
  connections: () => number;
  close: () => Promise<void>;
}> {
  let connections = 0;
  const server = net.createServer((socket) => {
    connections++;
    const decoder = new FrameDecoder(1 << 20);
    socket.on('error', () => undefined);
    socket.on('data', (chunk) => {
      for (const frame of decoder.push(chunk)) {
        const payload = frame.subarray(14);
        const out = Buffer.alloc(8 + payload.length);
        out.writeInt32BE(4 + payload.length, 0);
        out.writeInt32BE(frame.readInt32BE(8), 4);
        payload.copy(out, 8);
        socket.write(out);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    connections: () => connections,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A Metadata v1 request frame (null client id) whose body is `payload`: what the echo broker echoes. */
export function echoRequest(correlationId: number, payload: Buffer): Buffer {
  const frame = Buffer.alloc(14 + payload.length);
  frame.writeInt32BE(10 + payload.length, 0);
  frame.writeInt16BE(3, 4); // Metadata
  frame.writeInt16BE(1, 6);
  frame.writeInt32BE(correlationId, 8);
  frame.writeInt16BE(-1, 12);
  payload.copy(frame, 14);
  return frame;
}
