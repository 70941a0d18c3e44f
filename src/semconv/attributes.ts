/** Instrumentation scope name of every span lifeline starts (SPEC §9). */
export const SCOPE_NAME = 'lifeline';

/** Span attribute keys of lifeline's telemetry vocabulary (SPEC §5, §6, §9). */
export const ATTR_HEALTH_COMPONENT = 'lifeline.health.component';
export const ATTR_HEALTH_PROBE = 'lifeline.health.probe';
export const ATTR_HEALTH_TICK = 'lifeline.health.tick';
export const ATTR_DEADLINE_AT = 'lifeline.deadline.at';
export const ATTR_DEADLINE_BUDGET_MS = 'lifeline.deadline.budget_ms';
export const ATTR_DEADLINE_SOURCE = 'lifeline.deadline.source';
export const ATTR_DEADLINE_EXCEEDED = 'lifeline.deadline.exceeded';
export const ATTR_DEADLINE_MISSING = 'lifeline.deadline.missing';
