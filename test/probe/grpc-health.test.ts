/**
 * gRPC's standard health protocol answered from the catalog, spoken to by a real grpc-js client
 * whose messages protobufjs encodes from the protocol's published .proto (not lifeline's encoder).
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { addGrpcHealthService, HealthCatalog } from '../../src/index.js';
import { ROOT } from '../support/node.js';
import { startService, type ChildService } from '../support/service.js';

type Status = 'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';
interface HealthClient extends grpc.Client {
  Check(request: { service: string }, callback: (error: grpc.ServiceError | null, response?: { status: Status }) => void): void;
  Watch(request: { service: string }): grpc.ClientReadableStream<{ status: Status }>;
}

const definition = protoLoader.loadSync(join(ROOT, 'test/fixtures/proto/health.proto'), { enums: String, defaults: true });
const proto = grpc.loadPackageDefinition(definition) as unknown as {
  grpc: { health: { v1: { Health: new (address: string, credentials: grpc.ChannelCredentials) => HealthClient } } };
};

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

let removeHealth: () => void = () => undefined;

async function serverWithHealth(health: HealthCatalog): Promise<HealthClient> {
  const server = new grpc.Server();
  removeHealth = addGrpcHealthService(server, { health });
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => {
      if (error) reject(error);
      else resolve(bound);
    });
  });
  cleanup.push(() => {
    server.forceShutdown();
  });
  return client(port);
}

function client(port: number): HealthClient {
  const made = new proto.grpc.health.v1.Health(`127.0.0.1:${String(port)}`, grpc.credentials.createInsecure());
  cleanup.push(() => {
    made.close();
  });
  return made;
}

const check = (health: HealthClient, service: string): Promise<Status> =>
  new Promise((resolve, reject) => {
    health.Check({ service }, (error, response) => {
      if (error) reject(error);
      else resolve(response?.status ?? 'UNKNOWN');
    });
  });

/** The statuses a Watch stream sends, as they come. */
function watch(health: HealthClient, service: string): { next(): Promise<Status>; cancel(): void } {
  const stream = health.Watch({ service });
  const queue: Status[] = [];
  const waiting: ((status: Status) => void)[] = [];
  stream.on('data', (message: { status: Status }) => {
    const taker = waiting.shift();
    if (taker) taker(message.status);
    else queue.push(message.status);
  });
  stream.on('error', () => undefined); // the cancel at the end
  return {
    next: () => {
      const queued = queue.shift();
      return queued === undefined ? new Promise((resolve) => waiting.push(resolve)) : Promise.resolve(queued);
    },
    cancel: () => {
      stream.cancel();
    },
  };
}

describe('addGrpcHealthService: grpc.health.v1.Health from the catalog', () => {
  it('Check: "" and "live" are liveness, "ready" readiness, "startup" the startup probe, each as the catalog says', async () => {
    const health = new HealthCatalog();
    cleanup.push(() => {
      health.close();
    });
    const rpc = await serverWithHealth(health);
    for (const service of ['', 'live', 'ready', 'startup']) expect(await check(rpc, service), service).toBe('SERVING');

    const poller = health.registerLiveness('poller'); // unhealthy until its first tick
    health.registerReadiness('database');
    expect(await check(rpc, '')).toBe('NOT_SERVING');
    expect(await check(rpc, 'live')).toBe('NOT_SERVING');
    poller.take();
    health.runRound();
    expect(await check(rpc, '')).toBe('SERVING');
    expect(await check(rpc, 'ready')).toBe('NOT_SERVING'); // the database component has not ticked
    expect(await check(rpc, 'startup')).toBe('SERVING');
  });

  it('Check of a service it does not know: NOT_FOUND, naming the ones it knows', async () => {
    const health = new HealthCatalog();
    cleanup.push(() => {
      health.close();
    });
    const rpc = await serverWithHealth(health);
    // Names an object has by inheritance are no services either.
    for (const inherited of ['constructor', 'toString', '__proto__'])
      await expect(check(rpc, inherited)).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    await expect(check(rpc, 'helloworld.Greeter')).rejects.toMatchObject({
      code: grpc.status.NOT_FOUND,
      details: expect.stringContaining('"ready"'),
    });
  });

  it('Watch: the status at once, then each change, until the caller cancels; an unknown service gets SERVICE_UNKNOWN', async () => {
    const health = new HealthCatalog();
    cleanup.push(() => {
      health.close();
    });
    const rpc = await serverWithHealth(health);
    const live = watch(rpc, '');
    const ready = watch(rpc, 'ready');
    expect(await live.next()).toBe('SERVING');
    expect(await ready.next()).toBe('SERVING');

    const poller = health.registerLiveness('poller');
    expect(await live.next()).toBe('NOT_SERVING');
    expect(await ready.next()).toBe('NOT_SERVING'); // readiness fails with liveness
    poller.take();
    health.runRound();
    expect(await live.next()).toBe('SERVING');
    expect(await ready.next()).toBe('SERVING');
    health.drain(); // shutting down: readiness fails, liveness stays
    expect(await ready.next()).toBe('NOT_SERVING');
    expect(await check(rpc, '')).toBe('SERVING');
    live.cancel();
    ready.cancel();

    const unknown = watch(rpc, 'nope');
    expect(await unknown.next()).toBe('SERVICE_UNKNOWN');
    unknown.cancel();
  });

  it('removing the service ends the Watch streams (a graceful shutdown waits for open calls), and Check is then unimplemented', async () => {
    const health = new HealthCatalog();
    cleanup.push(() => {
      health.close();
    });
    const rpc = await serverWithHealth(health);
    const stream = rpc.Watch({ service: '' });
    const ended = new Promise<void>((resolve) => {
      stream.on('end', resolve);
      stream.on('error', () => {
        resolve();
      });
    });
    stream.on('data', () => undefined);
    await new Promise<void>((resolve) =>
      stream.once('data', () => {
        resolve();
      }),
    );
    removeHealth();
    await ended;
    await expect(check(rpc, '')).rejects.toMatchObject({ code: grpc.status.UNIMPLEMENTED });
  });

  it('a request that is not a HealthCheckRequest is refused (fields it does not know are skipped), and the server keeps serving', async () => {
    const health = new HealthCatalog();
    cleanup.push(() => {
      health.close();
    });
    const rpc = await serverWithHealth(health);
    const rawClient = new grpc.Client(rpc.getChannel().getTarget(), grpc.credentials.createInsecure());
    cleanup.push(() => {
      rawClient.close();
    });
    const answers: number[] = [];
    for (const bytes of [
      Buffer.from([0x12, 0x01, 0x41]), // field 2, unknown: skipped, so service "" (liveness)
      Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]), // a name longer than the message
      Buffer.from([0x0a, 0x05, 0x72]), // a name cut short
      Buffer.alloc(4_096, 0x0a), // far longer than any service name
    ]) {
      const code = await new Promise<number>((resolve) => {
        rawClient.makeUnaryRequest(
          '/grpc.health.v1.Health/Check',
          (request: Buffer) => request,
          (response: Buffer) => response,
          bytes,
          (error) => {
            resolve(error?.code ?? grpc.status.OK);
          },
        );
      });
      answers.push(code);
    }
    expect(answers).toEqual([grpc.status.OK, grpc.status.NOT_FOUND, grpc.status.NOT_FOUND, grpc.status.NOT_FOUND]);
    expect(await check(rpc, '')).toBe('SERVING');
  });
});

describe('register mode adds it to the servers an app binds', () => {
  let service: ChildService | undefined;
  afterEach(async () => {
    await service?.stop();
    service = undefined;
  });

  it('a grpc-js app with no health service: Kubernetes’ gRPC probe gets SERVING from lifeline, on the app’s port', async () => {
    service = await startService('test/fixtures/grpc-greeter.mjs', { LIFELINE_PROBE_PORT: '0', OTEL_TRACES_EXPORTER: 'none' }, [
      '--import',
      'otel-lifeline/register',
    ]);
    const rpc = client(Number(service.first.port));
    expect(await check(rpc, '')).toBe('SERVING');
    expect(await check(rpc, 'ready')).toBe('SERVING');
  });

  it('an app with a health service of its own keeps it, added before binding or after; LIFELINE_GRPC_HEALTH=off adds none', async () => {
    for (const when of ['before-bind', 'after-bind']) {
      service = await startService(
        'test/fixtures/grpc-greeter.mjs',
        { LIFELINE_PROBE_PORT: '0', OTEL_TRACES_EXPORTER: 'none', OWN_HEALTH: when },
        ['--import', 'otel-lifeline/register'],
      );
      expect(await check(client(Number(service.first.port)), ''), when).toBe('NOT_SERVING'); // the app's own answer
      expect(service.stderr(), when).not.toContain('already provided');
      await service.stop();
    }

    service = await startService(
      'test/fixtures/grpc-greeter.mjs',
      { LIFELINE_PROBE_PORT: '0', OTEL_TRACES_EXPORTER: 'none', LIFELINE_GRPC_HEALTH: 'off' },
      ['--import', 'otel-lifeline/register'],
    );
    await expect(check(client(Number(service.first.port)), '')).rejects.toMatchObject({ code: grpc.status.UNIMPLEMENTED });
  });
});
