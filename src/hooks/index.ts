// For lifeline's client folders: the one way they change a driver's module, in every copy loaded;
// and for what waits until the app loads a module (its instrumentation, a wrap of Node's module).
export { patchModuleFiles, wrapMethod, wrapMethods, type ModuleFilePatch, type PatchedModules } from './module-files.js';
export { whenFirstResolved } from './first-resolve.js';
