/** Builds Jaeger if needed and returns the binary's path. */
export function jaegerBinary(): string;

export interface LocalStack {
  otlpHttpEndpoint: string;
  otlpGrpcEndpoint: string;
  queryUrl: string;
  /** Kills the collector at once (SIGKILL), as a crash would; Jaeger keeps running. */
  killCollector(): Promise<void>;
  /** Starts the collector again after killCollector(). */
  restartCollector(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts Jaeger (store + query) on loopback and the collector in front of it, its OTLP receivers
 * on `collectorHost` (default 127.0.0.1; a test host's link address makes it reachable from there).
 */
export function startLocalStack(options?: { base?: number; log?: boolean; collectorHost?: string }): Promise<LocalStack>;
