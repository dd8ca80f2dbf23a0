/**
 * The floor a Node relay can reach: for each `[listenHost:]listenPort=upstreamHost:upstreamPort`
 * argument, accept on listenHost:listenPort (default 127.0.0.1) and `socket.pipe()` both ways to
 * the upstream — no framing, no parsing, Node's own stream backpressure. The benchmarks run it in
 * place of a sidecar, on the sidecar's addresses (KafkaCluster.startBarePipe), as their
 * `bare-pipe` arms (issue #13).
 */
import net from 'node:net';

for (const arg of process.argv.slice(2)) {
  const match = /^(?:(.+):)?(\d+)=(.+):(\d+)$/.exec(arg);
  if (!match) throw new Error(`not [listenHost:]listenPort=host:port: ${arg}`);
  const [, listenHost = '127.0.0.1', listen, host, port] = match as unknown as [
    string,
    string | undefined,
    string,
    string,
    string,
  ];
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
    .listen(Number(listen), listenHost);
}
console.log('bare pipe ready');
process.on('SIGTERM', () => process.exit(0));
