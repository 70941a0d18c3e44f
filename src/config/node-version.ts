/** The oldest Node.js lifeline runs on (`module.registerHooks`, undici 8, the http diagnostics channels). */
export const MINIMUM_NODE = '22.15.0';

/**
 * Why this Node cannot run lifeline, or `undefined` when it can. Checked before anything that
 * would fail deep inside a dependency on an older Node (undici 8 crashes with a TypeError there).
 */
export function unsupportedNode(version: string = process.versions.node): string | undefined {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  const [needMajor = 0, needMinor = 0] = MINIMUM_NODE.split('.').map(Number);
  if (major > needMajor || (major === needMajor && minor >= needMinor)) return undefined;
  return `otel-lifeline needs Node.js >= ${MINIMUM_NODE.replace(/\.0$/, '')}, this is v${version}`;
}
