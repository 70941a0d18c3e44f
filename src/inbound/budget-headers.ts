/** The header carrying the caller's remaining budget, in whole milliseconds. */
export const DEADLINE_HEADER = 'x-request-timeout-ms';

/**
 * Budgets other parts of a mesh send, in whole milliseconds, obeyed as {@link DEADLINE_HEADER} is:
 * Envoy's (Istio's sidecar, a front proxy) timeout for the request it forwards, and Connect RPC's
 * per-call timeout. The smallest budget a request carries wins.
 */
export const MESH_HEADERS = ['x-envoy-expected-rq-timeout-ms', 'connect-timeout-ms'] as const;

/** Every header an inbound budget is read from: the caller's, then the mesh's. */
export const BUDGET_HEADERS: readonly string[] = [DEADLINE_HEADER, ...MESH_HEADERS];
