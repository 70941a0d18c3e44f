/** An unhealthy component as the catalog hands it to diagnostics. */
export interface DiagnosedComponent {
  /** The name it was registered under. */
  readonly name: string;
  /** Which probes it counts in. */
  readonly probe: 'liveness' | 'readiness' | 'startup';
  /** The tick the component last took, whose trace holds its stuck work. */
  readonly tick: { readonly traceId: string; readonly spanId: string; readonly seq: number; readonly deadline: number } | undefined;
}

/** One in-flight span of a stuck trace, with its in-flight children. */
export interface InFlightNode {
  /** The span's name, redacted. */
  readonly name: string;
  /** Its trace ID: 32 lowercase hex digits, as in W3C `traceparent`. */
  readonly traceId: string;
  /** Its span ID: 16 lowercase hex digits. */
  readonly spanId: string;
  /** Its parent's span ID; `undefined` for a root, or a parent that has ended. */
  readonly parentSpanId: string | undefined;
  /** Ms since the span started. */
  readonly ageMs: number;
  /** When it started, epoch ms (sub-ms precise, from the span's start time). */
  readonly startedAt: number;
  /** Its deadline (epoch ms, as `Deadline.at`) and the ms left to it, negative once passed; `undefined` when nothing bounded it. */
  readonly deadline: { readonly at: number; readonly remainingMs: number } | undefined;
  /** Key attributes (URL, method, peer, component, …), redacted. */
  readonly attributes: Readonly<Record<string, string | number | boolean>>;
  /** The first user frame of the creation stack, when stacks are captured. */
  readonly origin: string | undefined;
  /** The creation stack, lifeline's and OpenTelemetry's own frames trimmed. */
  readonly stack: string | undefined;
  /** Its children still in flight. */
  readonly children: readonly InFlightNode[];
}

/** A libuv handle of the process, from `process.report`. */
export interface HandleInfo {
  /** libuv's handle type: `tcp`, `timer`, `pipe`, … */
  readonly type: string;
  /** What it is: a socket's two endpoints, when a timer fires, whether it is unref-ed. */
  readonly details: string;
}

/** What `health.diagnose()` returns and a `health verdict` span carries. */
export interface DiagnosticSnapshot {
  /** When it was taken, epoch ms (as `Date.now()`). */
  readonly at: number;
  /** The unhealthy components' names, sorted. */
  readonly unhealthy: readonly string[];
  /** Per unhealthy component: its last tick and what is still in flight in that tick's trace. */
  readonly components: readonly {
    readonly name: string;
    readonly probe: string;
    readonly tick: DiagnosedComponent['tick'];
    /** The trace's spans still in flight, as trees (roots first). */
    readonly inFlight: readonly InFlightNode[];
    /** In-flight spans of the trace left out of `inFlight` (it keeps the first 1,000). */
    readonly omitted: number;
  }[];
  /** The process: what a goroutine dump would add. */
  readonly process: {
    readonly pid: number;
    /** Seconds since the process started. */
    readonly uptimeS: number;
    /** Its libuv handles: sockets with their peers, timers. */
    readonly handles: readonly HandleInfo[];
    /** `process.getActiveResourcesInfo()`, counted by kind. */
    readonly activeResources: Readonly<Record<string, number>>;
    /** Event-loop delay since the last diagnostic. */
    readonly eventLoopDelayMs: { readonly p50: number; readonly p99: number; readonly max: number };
  };
  /** In-flight spans the tracker dropped because it was full. */
  readonly evicted: number;
}

/** An event-loop block, as the verdict recorded after it says it. */
export interface BlockedLoop {
  /** How long the loop did not run. */
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
  /** Releases what it holds (a delay sampler, say). A catalog calls it only for diagnostics it made from options. */
  close?(): void;
}
