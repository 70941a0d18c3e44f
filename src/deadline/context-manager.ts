import { context, createContextKey } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';

const PROBE_KEY = createContextKey('lifeline.context-manager-probe');
let carrying = false;

/**
 * Makes sure a context manager carries values across async calls. Without one, the API's no-op
 * manager drops every value, so a deadline set in `withDeadline` would silently vanish. We register
 * the same AsyncLocalStorage manager NodeSDK would, and only when nothing else did: probing with
 * `context.with` uses the public API and logs nothing, unlike a failed duplicate registration.
 * Once a manager is seen to carry values the answer is cached (the probe costs ~0.5 µs, too much
 * for every tick); whoever later calls `context.disable()` takes context propagation down with it.
 */
export function ensureContextManager(): void {
  if (carrying) return;
  if (!carries()) context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  carrying = carries();
}

function carries(): boolean {
  return context.with(context.active().setValue(PROBE_KEY, true), () => context.active().getValue(PROBE_KEY)) === true;
}
