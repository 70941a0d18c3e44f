export { deadlineInterceptor } from './deadline-interceptor.js';
export { installDeadlineDispatcher, type DeadlineDispatcherOptions, type InstalledDeadlineDispatcher } from './install.js';
export { installDispatcherDeadlines, type DispatcherDeadlinesOptions, type InstalledDispatcherDeadlines } from './own-dispatchers.js';
