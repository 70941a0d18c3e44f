import { context, createContextKey } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';

const PROBE_KEY = createContextKey('lifeline.context-manager-probe');

/**
 * Makes sure a context manager carries values across async calls. Without one, the API's no-op
 * manager drops every value, so a deadline set in `withDeadline` would silently vanish. We register
 * the same AsyncLocalStorage manager NodeSDK would, and only when nothing else did: probing with
 * `context.with` uses the public API and logs nothing, unlike a failed duplicate registration.
 * The probe runs on every call (well under a microsecond) so that a manager disabled later, as
 * `sdk.shutdown()` does, is replaced rather than trusted.
 */
export function ensureContextManager(): void {
  const carried = context.with(context.active().setValue(PROBE_KEY, true), () => context.active().getValue(PROBE_KEY));
  if (carried !== true) context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
}
