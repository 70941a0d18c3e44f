/** Where a deadline came from; `headers` bounds only the wait for a call's response head (`headersTimeoutMs`). */
export type DeadlineSource = 'tick' | 'inbound' | 'scope' | 'policy' | 'headers';

/** The reason a deadline aborts work: the deadline passed before the work finished. */
export class DeadlineExceededError extends Error {
  /** Always `DeadlineExceededError`. */
  override readonly name = 'DeadlineExceededError';
  /**
   * Always `ERR_DEADLINE_EXCEEDED`: {@link isDeadlineExceeded} recognises the error by it, also one
   * thrown by another copy of lifeline in the process.
   */
  readonly code = 'ERR_DEADLINE_EXCEEDED';
  /** The deadline that passed, epoch ms. */
  readonly deadline: number;
  /** Where that deadline came from. */
  readonly source: DeadlineSource;

  constructor(deadline: number, source: DeadlineSource, options?: ErrorOptions) {
    super(`deadline exceeded (${source} deadline ${new Date(deadline).toISOString()})`, options);
    this.deadline = deadline;
    this.source = source;
  }
}

/**
 * Requests and responses lifeline ended at their deadline. Some clients report a body cut short in
 * words of their own (axios: "stream has been aborted", got: "The server aborted pending request")
 * without the reason; their errors still carry the request or response, which this recognises.
 */
const endedByDeadline = new WeakSet<object>();

/** Remembers that `message` (a request or a response) was ended by its deadline. */
export function markEndedByDeadline(message: object): void {
  endedByDeadline.add(message);
}

// Cause chains are user data: bound the walk so a cyclic or absurd chain cannot hang us.
const MAX_CAUSE_DEPTH = 16;

/**
 * True when `err`, or any error in its `cause` chain, is a deadline expiry. Fetch wraps dispatcher
 * errors in `TypeError('fetch failed')`, so checking only the top level would miss most of them.
 * Matching on `code` also recognises errors from another copy of lifeline in the same process, and
 * an error that names the request or response lifeline ended (axios' and got's `request`/`response`)
 * is recognised too, as is a gRPC `DEADLINE_EXCEEDED` status error of `@grpc/grpc-js`. ORMs that wrap a
 * driver's error without a `cause` keep it as `parent`/`original` (Sequelize's `DatabaseError`): followed too.
 */
export function isDeadlineExceeded(err: unknown): boolean {
  let current: unknown = err;
  for (let depth = 0; depth < MAX_CAUSE_DEPTH && current !== null && typeof current === 'object'; depth++) {
    if (current instanceof DeadlineExceededError) return true;
    const { code, request, response, cause, details, metadata, parent, original } = current as {
      code?: unknown;
      request?: unknown;
      response?: unknown;
      cause?: unknown;
      details?: unknown;
      metadata?: unknown;
      parent?: unknown;
      original?: unknown;
    };
    if (code === 'ERR_DEADLINE_EXCEEDED') return true;
    // @grpc/grpc-js's ServiceError with status DEADLINE_EXCEEDED (4).
    if (code === 4 && typeof details === 'string' && typeof metadata === 'object' && metadata !== null) return true;
    if (
      (typeof request === 'object' && request !== null && endedByDeadline.has(request)) ||
      (typeof response === 'object' && response !== null && endedByDeadline.has(response))
    )
      return true;
    current = cause ?? parent ?? original;
  }
  return false;
}
