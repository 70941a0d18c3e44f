import type * as Grpc from '@grpc/grpc-js';

/**
 * A real gRPC service on loopback (HTTP/2, grpc-js on both sides), messages as JSON:
 * - `Stall` (unary) never answers; `Trickle` (server streaming) sends one message, then stalls;
 * - `Deadline` (unary) answers with the deadline its handler runs under (`currentDeadline()`);
 * - `Hello` (unary) answers at once;
 * - `Slow` (unary) answers after `request.ms`; `Later` (server streaming) sends one message after
 *   `request.ms`, then ends; `Metadata` (unary) answers with the request metadata it received.
 * grpc-js is passed in, loaded after the SDK started, as a service under register mode loads it.
 */
export interface GrpcService {
  address: string;
  client: Grpc.Client & Record<string, (...args: unknown[]) => unknown>;
  close(): Promise<void>;
}

const json = {
  requestSerialize: (value: unknown) => Buffer.from(JSON.stringify(value ?? null)),
  requestDeserialize: (bytes: Buffer): unknown => JSON.parse(bytes.toString()),
  responseSerialize: (value: unknown) => Buffer.from(JSON.stringify(value ?? null)),
  responseDeserialize: (bytes: Buffer): unknown => JSON.parse(bytes.toString()),
};

const definition = {
  Stall: { path: '/lifeline.Test/Stall', requestStream: false, responseStream: false, ...json },
  Trickle: { path: '/lifeline.Test/Trickle', requestStream: false, responseStream: true, ...json },
  Deadline: { path: '/lifeline.Test/Deadline', requestStream: false, responseStream: false, ...json },
  Hello: { path: '/lifeline.Test/Hello', requestStream: false, responseStream: false, ...json },
  Slow: { path: '/lifeline.Test/Slow', requestStream: false, responseStream: false, ...json },
  Later: { path: '/lifeline.Test/Later', requestStream: false, responseStream: true, ...json },
  Metadata: { path: '/lifeline.Test/Metadata', requestStream: false, responseStream: false, ...json },
};

export async function startGrpcService(
  grpc: typeof Grpc,
  currentDeadline: () => { at: number; source: string } | undefined,
): Promise<GrpcService> {
  const server = new grpc.Server();
  const streams = new Set<Grpc.ServerWritableStream<unknown, unknown>>();
  server.addService(definition, {
    Stall: () => undefined,
    Trickle: (call: Grpc.ServerWritableStream<unknown, unknown>) => {
      streams.add(call);
      call.write({ n: 1 });
    },
    Deadline: (_call: unknown, callback: Grpc.sendUnaryData<unknown>) => {
      const deadline = currentDeadline();
      callback(null, deadline === undefined ? { source: null } : { at: deadline.at, source: deadline.source }); // grpc-js sends no message for null
    },
    Hello: (_call: unknown, callback: Grpc.sendUnaryData<unknown>) => {
      callback(null, { hello: 'world' });
    },
    Slow: (call: Grpc.ServerUnaryCall<{ ms: number }, unknown>, callback: Grpc.sendUnaryData<unknown>) => {
      const timer = setTimeout(() => {
        callback(null, { slow: true });
      }, call.request.ms);
      call.on('cancelled', () => {
        clearTimeout(timer);
      });
    },
    Later: (call: Grpc.ServerWritableStream<{ ms: number }, unknown>) => {
      const timer = setTimeout(() => {
        call.write({ n: 1 });
        call.end();
      }, call.request.ms);
      call.on('cancelled', () => {
        clearTimeout(timer);
      });
    },
    Metadata: (call: Grpc.ServerUnaryCall<unknown, unknown>, callback: Grpc.sendUnaryData<unknown>) => {
      callback(null, call.metadata.getMap());
    },
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => {
      if (error) reject(error);
      else resolve(bound);
    });
  });
  const address = `127.0.0.1:${String(port)}`;
  const Client = grpc.makeGenericClientConstructor(definition, 'Test');
  const client = new Client(address, grpc.credentials.createInsecure()) as GrpcService['client'];
  return {
    address,
    client,
    close: () =>
      new Promise<void>((resolve) => {
        client.close();
        server.forceShutdown();
        resolve();
      }),
  };
}

/** A unary call as a promise. */
export function unary(client: GrpcService['client'], method: string, request: unknown, options: Grpc.CallOptions = {}): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const call = client[method];
    if (call === undefined) throw new Error(method);
    call.call(client, request, options, (error: Error | null, response: unknown) => {
      if (error) reject(error);
      else resolve(response);
    });
  });
}

/** A server-streaming call, read to its end; resolves with the messages or rejects with the call's error. */
export function serverStream(
  client: GrpcService['client'],
  method: string,
  request: unknown,
  options: Grpc.CallOptions = {},
): Promise<unknown[]> {
  return new Promise((resolve, reject) => {
    const call = client[method];
    if (call === undefined) throw new Error(method);
    const stream = call.call(client, request, options) as NodeJS.ReadableStream;
    const messages: unknown[] = [];
    stream.on('data', (message: unknown) => messages.push(message));
    stream.on('error', reject);
    stream.on('end', () => {
      resolve(messages);
    });
  });
}
