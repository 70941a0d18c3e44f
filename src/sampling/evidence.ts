import { SpanStatusCode, type Attributes } from '@opentelemetry/api';
// Types only: what a span looks like to a processor.
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import {
  ATTR_DEADLINE_EXCEEDED,
  ATTR_EVENT_LOOP_BLOCKED_MS,
  ATTR_HEALTH_COMPONENT,
  ATTR_HEALTH_TICK,
  ATTR_HEALTH_UNHEALTHY,
  ATTR_IN_FLIGHT,
} from '../semconv/index.js';

/**
 * Whether a span is evidence from the moment it starts: a verdict, a verdict's span for an
 * unhealthy component (a component's span that is not a tick), a snapshot of a span in flight, a
 * blocked event loop. These are exported whatever the sampler says of their trace.
 */
export function isEvidenceAtStart(attributes: Attributes): boolean {
  return (
    attributes[ATTR_IN_FLIGHT] !== undefined ||
    attributes[ATTR_HEALTH_UNHEALTHY] !== undefined ||
    attributes[ATTR_EVENT_LOOP_BLOCKED_MS] !== undefined ||
    (attributes[ATTR_HEALTH_COMPONENT] !== undefined && attributes[ATTR_HEALTH_TICK] === undefined)
  );
}

/**
 * Whether an ended span makes its whole trace evidence: it failed (a call its deadline ended, an
 * error), or it was evidence from the start.
 */
export function isEvidence(span: ReadableSpan): boolean {
  return (
    span.status.code === SpanStatusCode.ERROR || span.attributes[ATTR_DEADLINE_EXCEEDED] === true || isEvidenceAtStart(span.attributes)
  );
}
