import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './node.js';

/** The Node release older than lifeline supports that the version check is tested on. */
export const OLD_NODE_VERSION = '20.20.2';

/** The registry's integrity of each platform's tarball, as `npm view node-<platform>@20.20.2 dist.integrity` gave it. */
const INTEGRITY: Record<string, string> = {
  'linux-x64': 'sha512-PeHQM8wAdmHtZA1mBocygZxs5LiUWtsJezQTkBd0iY987KpGrD1O2tVEydvMZiuXceRanxt7rjTnDEBwOPujoQ==',
  'linux-arm64': 'sha512-LCXJnNTFiyGuYBw2gZSI5OBFMbkjAPt8sqD/NKrWoE2QmDgSubTqFng6GaNJ9EJ8HpxBMGcWWpbbcs4Vo+CnGg==',
  'darwin-x64': 'sha512-uMVQFOdSjr/iYrfksIp5p4795m7FTAWVGaoMQGsYaSW9XMsUsqfd+yJU8KdOLd7UUuBlUX2sTdHVV5LNmmS7mw==',
};

/**
 * A Node.js binary older than lifeline supports, from the project, not from the machine: the npm
 * registry's `node-<platform>-<arch>` package (the one the `node` package installs), packed once
 * into `.cache/` and checked against the integrity pinned here. Not a devDependency: its `node`
 * bin would take the project's `node` link from the pinned Node 24 on `npm install`.
 */
export function oldNode(): string {
  const platform = `${process.platform}-${process.arch}`;
  const cache = join(ROOT, '.cache');
  const dir = join(cache, `node-${OLD_NODE_VERSION}-${platform}`);
  const bin = join(dir, 'bin', 'node');
  if (existsSync(bin)) return bin;
  const integrity = INTEGRITY[platform];
  if (integrity === undefined)
    throw new Error(`no Node ${OLD_NODE_VERSION} pinned for ${platform}: add its integrity to test/support/old-node.ts`);
  mkdirSync(cache, { recursive: true });
  const tmp = mkdtempSync(join(cache, 'old-node-'));
  try {
    const file = execFileSync('npm', ['pack', `node-${platform}@${OLD_NODE_VERSION}`, '--silent', '--pack-destination', tmp], {
      cwd: tmp,
      encoding: 'utf8',
    }).trim();
    const digest = `sha512-${createHash('sha512')
      .update(readFileSync(join(tmp, file)))
      .digest('base64')}`;
    if (digest !== integrity)
      throw new Error(`node-${platform}@${OLD_NODE_VERSION} from the registry is not the pinned tarball (${digest})`);
    execFileSync('tar', ['-xzf', join(tmp, file), '-C', tmp]);
    try {
      renameSync(join(tmp, 'package'), dir);
    } catch (err) {
      // Another test process unpacked it first: theirs is the same file.
      if (!existsSync(bin)) throw err;
    }
    return bin;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
