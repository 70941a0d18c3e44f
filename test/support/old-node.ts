import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './node.js';

/** The Node release older than lifeline supports that the version check is tested on. */
export const OLD_NODE_VERSION = '20.20.2';

/**
 * A Node.js binary older than lifeline supports, from the project, not from the machine: the npm
 * registry's `node-<platform>-<arch>` package (the one the `node` package installs), packed once
 * into `.cache/`. Not a devDependency: its `node` bin would take the project's `node` link from
 * the pinned Node 24 on `npm install`.
 */
export function oldNode(): string {
  const dir = join(ROOT, '.cache', `node-${OLD_NODE_VERSION}-${process.platform}-${process.arch}`);
  const bin = join(dir, 'bin', process.platform === 'win32' ? 'node.exe' : 'node');
  if (existsSync(bin)) return bin;
  const tmp = mkdtempSync(join(ROOT, '.cache', 'old-node-'));
  try {
    const name = `node-${process.platform === 'win32' ? 'win' : process.platform}-${process.arch}@${OLD_NODE_VERSION}`;
    const file = execFileSync('npm', ['pack', name, '--silent', '--pack-destination', tmp], { cwd: tmp, encoding: 'utf8' }).trim();
    execFileSync('tar', ['-xzf', join(tmp, file), '-C', tmp]);
    mkdirSync(join(ROOT, '.cache'), { recursive: true });
    renameSync(join(tmp, 'package'), dir);
    return bin;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
