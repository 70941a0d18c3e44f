export { installHttpDeadlines } from './http-deadlines.js';
// For lifeline's SDK wiring (client spans record a deadline the policy gave); not re-exported by the package.
export { policyDeadlineOf } from './http-deadlines.js';
// For diagnostics: which of the app's functions serve a stuck request.
export { requestHandlers, requestRoute } from './handlers.js';
// For lifeline's SDK wiring: requests named by the route their framework matched.
export { installRouteNames, type InstalledRouteNames } from './routes.js';
