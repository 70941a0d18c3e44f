import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import axios from 'axios';
import got from 'got';
// Namespace objects, read at call time: OpenTelemetry's http instrumentation patches their `get`.
import http, { Agent as HttpAgent } from 'node:http';
import https, { Agent as HttpsAgent } from 'node:https';
import nodeFetch from 'node-fetch';
import * as undici from 'undici';
import { withDeadline } from '../../src/index.js';

/** What a call may be given: an agent to queue on (node:http clients), and whether TLS is self-signed. */
export interface CallOptions {
  /** An `http.Agent`/`https.Agent` (e.g. `maxSockets: 1`) for clients built on node:http. */
  agent?: HttpAgent | HttpsAgent;
}

/** One HTTP client as an app uses it: a GET that resolves with the whole body as text. */
export type Client = (url: string, options?: CallOptions) => Promise<string>;

/** Trusts the loopback test servers' self-signed certificate (set by the test that makes it). */
export const tls = { ca: '' };

const isHttps = (url: string): boolean => url.startsWith('https:');

/** node:http / node:https as the standard library offers it. */
const nodeHttp: Client = (url, options = {}) =>
  new Promise((resolve, reject) => {
    const request = (isHttps(url) ? https : http).get(
      url,
      { ...(options.agent ? { agent: options.agent } : {}), ...(isHttps(url) ? { ca: tls.ca } : {}) },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => {
          resolve(body);
        });
        res.on('error', reject);
      },
    );
    request.on('error', reject);
  });

function httpsAgentFor(url: string, options: CallOptions): HttpAgent | HttpsAgent | undefined {
  if (options.agent !== undefined) return options.agent;
  return isHttps(url) ? new HttpsAgent({ ca: tls.ca }) : undefined;
}

/** Every client the deadline must reach, each consuming the whole body as a caller would. */
export const CLIENTS: Readonly<Record<string, Client>> = {
  'global fetch': async (url) => (await fetch(url)).text(),
  'undici.request': async (url) => (await undici.request(url)).body.text(),
  'node:http(s)': nodeHttp,
  axios: async (url, options = {}) => {
    const agent = httpsAgentFor(url, options);
    const res = await axios.get<string>(url, {
      responseType: 'text',
      ...(agent ? (isHttps(url) ? { httpsAgent: agent } : { httpAgent: agent }) : {}),
    });
    return res.data;
  },
  got: (url, options = {}) => {
    const agent = httpsAgentFor(url, options);
    const agents = agent === undefined ? {} : { agent: agent instanceof HttpsAgent ? { https: agent } : { http: agent } };
    return got(url, { retry: { limit: 0 }, ...agents }).text();
  },
  'node-fetch@2': async (url, options = {}) => {
    const agent = httpsAgentFor(url, options);
    return (await nodeFetch(url, agent ? { agent } : {})).text();
  },
  '@aws-sdk/client-s3': async (url, options = {}) => {
    const agent = httpsAgentFor(url, options);
    const s3 = new S3Client({
      endpoint: url,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      ...(agent ? { requestHandler: new NodeHttpHandler(isHttps(url) ? { httpsAgent: agent } : { httpAgent: agent }) } : {}),
    });
    try {
      const out = await s3.send(new GetObjectCommand({ Bucket: 'bucket', Key: 'key' }));
      return (await out.Body?.transformToString()) ?? '';
    } finally {
      s3.destroy();
    }
  },
};

/**
 * Runs `call` under a deadline `ms` from now. `lateMs` is how long after the deadline the call
 * failed, counted from when a plain timer for the same instant fired: on a loaded machine the event
 * loop itself may be late, and that is not the deadline's doing.
 */
export async function lateness(ms: number, call: () => Promise<unknown>): Promise<{ error: unknown; lateMs: number }> {
  const at = Date.now() + ms;
  let loopAt = Number.POSITIVE_INFINITY;
  const control = setTimeout(() => (loopAt = Date.now()), ms);
  try {
    await withDeadline(at, call);
  } catch (error) {
    const failedAt = Date.now();
    clearTimeout(control);
    return { error, lateMs: failedAt - Math.max(at, Math.min(loopAt, failedAt)) };
  }
  throw new Error('the call completed although its server never finishes');
}
