import { readFileSync } from 'node:fs';

/** The 1-based line of `// blocks here` in the function `name` of `file` (a blocking fixture): where the top frame must point. */
export function blockingLine(file: string, name: string): number {
  const lines = readFileSync(file, 'utf8').split('\n');
  const start = lines.findIndex((line) => line.includes(`function ${name}(`));
  return start + 1 + lines.slice(start).findIndex((line) => line.includes('// blocks here'));
}
