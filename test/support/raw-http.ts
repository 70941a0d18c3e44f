import { connect } from 'node:net';

/**
 * Sends raw bytes to a port and collects everything the server answers until it closes the
 * connection (or `timeoutMs` passes). For requests no HTTP client would send.
 */
export function rawExchange(
  port: number,
  bytes: string | Buffer,
  options: { timeoutMs?: number; keepOpen?: boolean } = {},
): Promise<{ answer: string; closed: boolean; ms: number }> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ answer, closed: false, ms: Date.now() - started });
    }, options.timeoutMs ?? 5_000);
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'ECONNRESET') reject(err);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ answer, closed: true, ms: Date.now() - started });
    });
    socket.write(bytes);
  });
}
