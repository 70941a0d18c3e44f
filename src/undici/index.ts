export { deadlineInterceptor } from './deadline-interceptor.js';
export { installDeadlineDispatcher, type DeadlineDispatcherOptions, type InstalledDeadlineDispatcher } from './install.js';
