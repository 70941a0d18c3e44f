/** An unhealthy component as the catalog hands it to diagnostics. */
export interface DiagnosedComponent {
  readonly name: string;
  readonly probe: 'liveness' | 'readiness' | 'startup';
  /** The tick the component last took, whose trace holds its stuck work. */
  readonly tick: { readonly traceId: string; readonly spanId: string; readonly seq: number; readonly deadline: number } | undefined;
}

/** One in-flight span of a stuck trace, with its in-flight children. */
export interface InFlightNode {
  readonly name: string;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  /** Ms since the span started. */
  readonly ageMs: number;
  readonly startedAt: string;
  readonly deadline: { readonly at: string; readonly remainingMs: number } | undefined;
  /** Key attributes (URL, method, peer, component, …), redacted. */
  readonly attributes: Readonly<Record<string, string | number | boolean>>;
  /** The first user frame of the creation stack, when stacks are captured. */
  readonly origin: string | undefined;
  /** The creation stack, lifeline's and OpenTelemetry's own frames trimmed. */
  readonly stack: string | undefined;
  readonly children: readonly InFlightNode[];
}

/** A libuv handle of the process, from `process.report`. */
export interface HandleInfo {
  readonly type: string;
  readonly details: string;
}

/** What `health.diagnose()` returns and a `health verdict` span carries. */
export interface DiagnosticSnapshot {
  readonly at: string;
  readonly unhealthy: readonly string[];
  readonly components: readonly {
    readonly name: string;
    readonly probe: string;
    readonly tick: DiagnosedComponent['tick'];
    readonly inFlight: readonly InFlightNode[];
    /** In-flight spans of the trace left out of `inFlight` (it keeps the first 1,000). */
    readonly omitted: number;
  }[];
  readonly process: {
    readonly pid: number;
    readonly uptimeS: number;
    readonly handles: readonly HandleInfo[];
    readonly activeResources: Readonly<Record<string, number>>;
    readonly eventLoopDelayMs: { readonly p50: number; readonly p99: number; readonly max: number };
  };
  /** In-flight spans the tracker dropped because it was full. */
  readonly evicted: number;
}

/** An event-loop block, as the verdict recorded after it says it. */
export interface BlockedLoop {
  readonly blockedMs: number;
  /** `crunchReport (/app/report.js:8)`, when the stack was captured. */
  readonly blockedIn?: string | undefined;
  /** The watchdog's `event loop blocked` span, linked from the verdict. */
  readonly span?: { readonly traceId: string; readonly spanId: string } | undefined;
}

/**
 * What a catalog calls to explain its verdicts. The catalog reports after every ping round; the
 * implementation decides whether to emit (transitions, rate limits).
 */
export interface HealthDiagnostics {
  /**
   * After a round: `turned` went healthy→unhealthy in it; `anyUnhealthy` says whether any component
   * is unhealthy now, and `unhealthy()` lists them (built only when asked: rounds are a hot path).
   */
  onRound(turned: readonly DiagnosedComponent[], anyUnhealthy: boolean, unhealthy: () => readonly DiagnosedComponent[]): void;
  /** The snapshot for these components, now. */
  snapshot(unhealthy: readonly DiagnosedComponent[]): DiagnosticSnapshot;
}
