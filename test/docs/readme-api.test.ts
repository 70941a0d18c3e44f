// The README's API table against the API reports (api/*.api.md, which `npm run api:check` keeps equal
// to the built code): each entry's rows name exactly what that entry exports, types included.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const read = (file: string): string => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

interface Entry {
  importPath: string;
  report: string;
}

/** The public entries of package.json `exports`, each with the report api/run.mjs writes for it. */
function publicEntries(): Entry[] {
  const pkg = JSON.parse(read('package.json')) as { name: string; exports: Record<string, string | { types?: string }> };
  return Object.entries(pkg.exports)
    .filter(([, target]) => typeof target === 'object' && target.types !== undefined)
    .map(([subpath]) => {
      const sub = subpath.replace(/^\.\/?/, '');
      return {
        importPath: sub === '' ? pkg.name : `${pkg.name}/${sub}`,
        report: `api/${sub === '' ? pkg.name : `${pkg.name}-${sub.replaceAll('/', '-')}`}.api.md`,
      };
    });
}

const DECLARATION = /^export (?:declare )?(?:abstract )?(?:class|function|interface|type|const|let|var|enum|namespace) ([A-Za-z_$][\w$]*)/;

/** The names an API report declares at its top level. */
function reportedNames(report: string): string[] {
  const names = new Set<string>();
  for (const line of report.split('\n')) {
    if (!line.startsWith('export ')) continue;
    const name = DECLARATION.exec(line)?.[1];
    // A form this parser does not know (`export { X }`, `export default`) must not go unchecked.
    if (name === undefined) throw new Error(`unrecognized line in an API report: ${line}`);
    names.add(name);
  }
  return [...names].sort();
}

/**
 * The names the README's API table lists per entry: the backticked identifiers in the rows of each
 * entry (a row whose first cell is empty continues the entry above). Backticked text that is not a
 * bare identifier (`lifeline.*`, `node --import …`) is prose. A row may instead link a page of
 * docs/ (`[the telemetry names](docs/telemetry.md)`): that entry's names are then the backticked
 * identifiers in the first cell of that page's table rows (`pages` reads a page by its path).
 */
function readmeNames(readme: string, pages: (path: string) => string = read): Map<string, string[]> {
  const section = /^## API\n([\s\S]*?)(?=^## )/m.exec(readme)?.[1];
  if (section === undefined) throw new Error('README.md has no "## API" section');
  const listed = new Map<string, Set<string>>();
  let entry: string | undefined;
  for (const line of section.split('\n')) {
    if (!line.startsWith('|')) {
      entry = undefined;
      continue;
    }
    const [first = '', ...rest] = line
      .split(/(?<!\\)\|/)
      .slice(1, -1)
      .map((cell) => cell.trim());
    // `otel-lifeline/sdk` is an entry; the header, the separator and bin `lifeline` are not.
    if (first !== '') entry = /^`([^`]+)`$/.exec(first)?.[1];
    if (entry === undefined) continue;
    const names = listed.get(entry) ?? new Set<string>();
    listed.set(entry, names);
    const cells = rest.join('|');
    for (const [, page = ''] of cells.matchAll(/\]\((docs\/[\w./-]+\.md)\)/g)) for (const name of pageNames(pages(page))) names.add(name);
    for (const [, code = ''] of cells.matchAll(/`([^`]+)`/g)) {
      if (/^[A-Za-z_$][\w$]*$/.test(code)) names.add(code);
    }
  }
  return new Map([...listed].map(([name, names]) => [name, [...names].sort()]));
}

/** The backticked identifiers in the first cell of a page's table rows. */
function pageNames(page: string): string[] {
  const names: string[] = [];
  for (const line of page.split('\n')) {
    if (!line.startsWith('|')) continue;
    const first = line.split(/(?<!\\)\|/)[1]?.trim() ?? '';
    const name = /^`([A-Za-z_$][\w$]*)`$/.exec(first)?.[1];
    if (name !== undefined) names.push(name);
  }
  return names;
}

function difference(exported: readonly string[], listed: readonly string[]): { missing: string[]; extra: string[] } {
  return { missing: exported.filter((name) => !listed.includes(name)), extra: listed.filter((name) => !exported.includes(name)) };
}

describe("README's API table", () => {
  const entries = publicEntries();
  const listed = readmeNames(read('README.md'));

  it('has rows for each public entry and for no other', () => {
    expect([...listed.keys()].sort()).toEqual(entries.map((entry) => entry.importPath).sort());
  });

  for (const entry of entries) {
    it(`names exactly what ${entry.importPath} exports (${entry.report})`, () => {
      expect(difference(reportedNames(read(entry.report)), listed.get(entry.importPath) ?? [])).toEqual({ missing: [], extra: [] });
    });
  }

  it('tells a name too few and one too many apart from prose', () => {
    const readme = [
      '## API',
      '',
      '| entry | exports |',
      '|---|---|',
      '| `pkg` | `alpha`, *`Beta`* (a `lifeline.*` name) |',
      '| | `gamma`, `delta(options)` |',
      '| bin `pkg` | `pkg health [--probe live\\|ready]`, `notAnExport` |',
      '',
      '`epsilon` outside the table',
      '',
      '## Next',
    ].join('\n');
    const names = readmeNames(readme);
    expect([...names.keys()]).toEqual(['pkg']);
    expect(difference(['Beta', 'alpha', 'delta', 'epsilon'], names.get('pkg') ?? [])).toEqual({
      missing: ['delta', 'epsilon'],
      extra: ['gamma'],
    });
    expect(reportedNames('export class A {\n}\nexport function b(): void;\nexport function b(x: 1): void;\nexport type C = 1;')).toEqual([
      'A',
      'C',
      'b',
    ]);
    expect(() => reportedNames('export { A }')).toThrow(/unrecognized/);
  });

  it("reads an entry's names from the docs page its row links", () => {
    const readme = [
      '## API',
      '',
      '| entry | exports |',
      '|---|---|',
      '| `pkg/names` | [the names](docs/names.md), `extra` |',
      '',
      '## Next',
    ].join('\n');
    const page = ['| constant | value |', '|---|---|', '| `ALPHA` | `a.b` |', '| `BETA` | `notListed` |', '| prose | `GAMMA` |'].join('\n');
    const names = readmeNames(readme, (path) => (path === 'docs/names.md' ? page : ''));
    expect(names.get('pkg/names')).toEqual(['ALPHA', 'BETA', 'extra']);
  });
});
