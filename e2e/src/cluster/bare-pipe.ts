/**
 * The floor a Node relay can reach: for each `listenPort=upstreamHost:upstreamPort` argument,
 * accept on 127.0.0.1:listenPort and `socket.pipe()` both ways to the upstream — no framing, no
 * parsing, Node's own stream backpressure. The pass-through benchmark runs it in place of a
 * sidecar, on the sidecar's ports, as the `bare-pipe` arm (issue #13).
 */
import net from 'node:net';

for (const arg of process.argv.slice(2)) {
  const match = /^(\d+)=(.+):(\d+)$/.exec(arg);
  if (!match) throw new Error(`not listenPort=host:port: ${arg}`);
  const [, listen, host, port] = match as unknown as [string, string, string, string];
  net
    .createServer({ noDelay: true }, (downstream) => {
      const upstream = net.connect({ host, port: Number(port), noDelay: true });
      downstream.pipe(upstream);
      upstream.pipe(downstream);
      const close = () => {
        downstream.destroy();
        upstream.destroy();
      };
      downstream.on('error', close).on('close', close);
      upstream.on('error', close).on('close', close);
    })
    .listen(Number(listen), '127.0.0.1');
}
console.log('bare pipe ready');
process.on('SIGTERM', () => process.exit(0));
