// For lifeline's client folders: the one way they change a driver's module, in every copy loaded.
export { patchModuleFiles, wrapMethod, wrapMethods, type ModuleFilePatch, type PatchedModules } from './module-files.js';
export { whenFirstResolved } from './first-resolve.js';
