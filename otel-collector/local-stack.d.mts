/** Builds Jaeger if needed and returns the binary's path. */
export function jaegerBinary(): string;

export interface LocalStack {
  otlpHttpEndpoint: string;
  otlpGrpcEndpoint: string;
  queryUrl: string;
  /** The collector's Prometheus endpoint: lifeline's metrics and the spanmetrics connector's. */
  prometheusUrl: string;
  /** Where the real Jaeger UI is served, when `uiAssets` gave one (else the query URL has a placeholder page). */
  uiUrl: string | undefined;
  /** Kills the collector at once (SIGKILL), as a crash would; Jaeger keeps running. */
  killCollector(): Promise<void>;
  /** Starts the collector again after killCollector(). */
  restartCollector(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts Jaeger (store + query) on loopback and the collector in front of it, its OTLP receivers
 * on `collectorHost` (default 127.0.0.1; a test host's link address makes it reachable from there).
 * `uiAssets` (default: env JAEGER_UI_ASSETS_PATH): a built jaeger-ui folder, served instead of the
 * binary's placeholder page.
 */
export function startLocalStack(options?: { base?: number; log?: boolean; collectorHost?: string; uiAssets?: string }): Promise<LocalStack>;

/** Builds lifeline's agent/gateway collector if needed and returns the binary's path. */
export function collectorBinary(): string;

/** One process of the collector tier. */
export interface TierProcess {
  readonly name: string;
  readonly child: import('node:child_process').ChildProcess;
  /** Kills it at once (SIGKILL), as a crash would. */
  kill(): Promise<void>;
  /** Starts it again (after a kill), resolving once it listens. */
  start(): Promise<void>;
}

export interface CollectorTier {
  /** Where services send OTLP/HTTP: the agent. */
  otlpHttpEndpoint: string;
  queryUrl: string;
  jaeger: TierProcess;
  gateways: TierProcess[];
  agent: TierProcess;
  stop(): Promise<void>;
}

/**
 * Starts the agent → two gateways (tail sampling) → Jaeger on Badger tier on loopback, ports from
 * `base` (+0 to +6).
 */
export function startCollectorTier(options: {
  base: number;
  badgerDir: string;
  decisionWait?: string;
  routinePercent?: number;
  agentQueueSize?: number;
  log?: boolean;
}): Promise<CollectorTier>;
