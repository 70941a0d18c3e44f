import type { ChildProcess } from 'node:child_process';

/** Builds Jaeger if needed and returns the binary's path. */
export function jaegerBinary(): string;

export interface LocalStack {
  otlpHttpEndpoint: string;
  otlpGrpcEndpoint: string;
  queryUrl: string;
  /** The collector process, for fault tests that kill and restart it. */
  collector: ChildProcess;
  stop(): Promise<void>;
}

/** Starts Jaeger (store + query) and the collector in front of it on loopback. */
export function startLocalStack(options?: { base?: number; log?: boolean }): Promise<LocalStack>;
