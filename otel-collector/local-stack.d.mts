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
