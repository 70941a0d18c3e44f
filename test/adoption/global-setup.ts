import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { TestProject } from 'vitest/node';
import { ROOT } from '../support/node.js';
import { describeRun, run, serviceEnv } from './support.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The `npm pack` tarball of the built package, made once for all adoption tests. */
    lifelineTarball: string;
  }
}

/**
 * Packs the built package (`npm run build` ran before) once, into a directory outside the repository.
 * ADOPTION_TARBALL=/path/to/otel-lifeline-x.y.z.tgz tests that tarball instead (another build, a release).
 */
export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const given = process.env.ADOPTION_TARBALL;
  if (given !== undefined && given !== '') {
    project.provide('lifelineTarball', resolve(given));
    return undefined;
  }
  const dir = await mkdtemp(join(tmpdir(), 'lifeline-adoption-pack-'));
  const pack = await run('npm', ['pack', '--json', '--pack-destination', dir], { cwd: ROOT, env: serviceEnv(), timeoutMs: 60_000 });
  if (pack.code !== 0) throw new Error(describeRun('npm pack', pack));
  const [{ filename }] = JSON.parse(pack.stdout) as [{ filename: string }];
  project.provide('lifelineTarball', join(dir, filename));
  return () => rm(dir, { recursive: true, force: true });
}
