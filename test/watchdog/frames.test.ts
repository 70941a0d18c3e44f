import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { describeFrame, framesOf, SourceMapper, stackText, topUserFrame, type BlockedFrame } from '../../src/watchdog/frames.js';

// The watchdog thread maps frames of compiled files with a 64 MB heap: costly maps must not be read.
const dir = mkdtempSync(join(tmpdir(), 'lifeline-maps-'));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/**
 * A map sending line 1, column 1 of the compiled file to line 3 of `report.ts`; `padding` bytes of
 * sources content make its file big, `segments` more mappings (on later lines) make it costly to decode.
 */
function mapJson(padding = 0, segments = 0): string {
  return JSON.stringify({
    version: 3,
    sources: ['report.ts'],
    names: [],
    mappings: `AAEA${';AACA'.repeat(segments)}`,
    sourcesContent: ['x'.repeat(padding)],
  });
}

function script(name: string, body: string): BlockedFrame {
  const file = join(dir, name);
  writeFileSync(file, body);
  return { function: 'crunchReport', file, line: 1, column: 1 };
}

const inline = (json: string) => `//# sourceMappingURL=data:application/json;base64,${Buffer.from(json).toString('base64')}\n`;

describe("SourceMapper: frames of compiled files, within the watchdog thread's heap", () => {
  it('maps through an inline map and through a map file beside the script', () => {
    writeFileSync(join(dir, 'beside.js.map'), mapJson());
    const frames = [
      script('inline.js', `crunch();\n${inline(mapJson())}`),
      script('beside.js', 'crunch();\n//# sourceMappingURL=beside.js.map\n'),
    ];
    expect(new SourceMapper().map(frames).map((f) => `${f.file}:${String(f.line)}`)).toEqual([
      join(dir, 'report.ts:3'),
      join(dir, 'report.ts:3'),
    ]);
  });

  it('leaves frames as compiled when the map file is over 4 MiB (inline or beside) or its mappings over 512 KiB; a bundle over 4 MiB is read only at its end', () => {
    writeFileSync(join(dir, 'big.js.map'), mapJson(5 * 1024 * 1024));
    writeFileSync(join(dir, 'dense.js.map'), mapJson(0, 300_000)); // 1.2 MB of mappings, 0.1 MB of sources
    writeFileSync(join(dir, 'bundle.js.map'), mapJson());
    const frames = [
      script('big-inline.js', `crunch();\n${inline(mapJson(5 * 1024 * 1024))}`),
      script('big-beside.js', 'crunch();\n//# sourceMappingURL=big.js.map\n'),
      script('dense.js', 'crunch();\n//# sourceMappingURL=dense.js.map\n'),
      script('bundle.js', `crunch();\n/*${' '.repeat(5 * 1024 * 1024)}*/\n//# sourceMappingURL=bundle.js.map\n`),
    ];
    const mapped = new SourceMapper().map(frames);
    expect(mapped.slice(0, 3)).toEqual(frames.slice(0, 3));
    expect(`${mapped[3]?.file ?? ''}:${String(mapped[3]?.line)}`).toBe(join(dir, 'report.ts:3'));
  });

  it('a map of 3 MiB of sources content but small mappings is read', () => {
    writeFileSync(join(dir, 'sources.js.map'), mapJson(3 * 1024 * 1024, 1_000));
    const [mapped] = new SourceMapper().map([script('sources.js', 'crunch();\n//# sourceMappingURL=sources.js.map\n')]);
    expect(`${mapped?.file ?? ''}:${String(mapped?.line)}`).toBe(join(dir, 'report.ts:3'));
  });

  it('a missing or broken map leaves the frame as it is', () => {
    const frames = [
      script('missing.js', 'crunch();\n//# sourceMappingURL=nowhere.js.map\n'),
      script('broken.js', `crunch();\n${inline('{not json')}`),
      { function: 'f', file: 'node:internal/x', line: 1, column: 1 },
    ];
    expect(new SourceMapper().map(frames)).toEqual(frames);
  });
});

describe('SourceMapper: the maps kept are bounded', () => {
  it('past 1 MiB of mappings kept, the oldest map is dropped (read again when needed); the others stay as read', () => {
    // Each map: ~500 KB of mappings (under the 512 KiB a map may have), two fit in what is kept.
    const dense = (line: number) => mapJson(0, 100_000).replace('"AAEA', `"AA${line === 3 ? 'E' : 'I'}A`);
    const frames = ['a', 'b', 'c'].map((name) => {
      writeFileSync(join(dir, `kept-${name}.js.map`), dense(3));
      return script(`kept-${name}.js`, `crunch();\n//# sourceMappingURL=kept-${name}.js.map\n`);
    });
    const mapper = new SourceMapper();
    const lines = (mapped: BlockedFrame[]) => mapped.map((f) => f.line);
    expect(lines(mapper.map(frames))).toEqual([3, 3, 3]);
    // The maps change on disk: only one that was dropped is read again.
    for (const name of ['a', 'b']) writeFileSync(join(dir, `kept-${name}.js.map`), dense(5));
    expect(lines(mapper.map([frames[1] as BlockedFrame]))).toEqual([3]);
    expect(lines(mapper.map([frames[0] as BlockedFrame]))).toEqual([5]);
  });
});

describe('frames as people read them', () => {
  const crunch: BlockedFrame = { function: 'crunchReport', file: '/app/report.js', line: 8, column: 3 };
  const internal: BlockedFrame = { function: 'readFileSync', file: 'node:fs', line: 441, column: 20 };
  const unknown: BlockedFrame = { function: '', file: '', line: 1, column: 1 };

  it("framesOf: 1-based lines and columns, paths for file URLs, an ES module's URL from its parsed script", () => {
    const scripts = new Map([['42', 'file:///app/esm%20dir/report.mjs']]);
    expect(
      framesOf(
        [
          { functionName: 'crunchReport', url: '', location: { scriptId: '42', lineNumber: 7, columnNumber: 2 } },
          { functionName: 'readFileSync', url: 'node:fs', location: { scriptId: '1', lineNumber: 440 } },
          { functionName: '', url: '', location: { scriptId: '99', lineNumber: 0, columnNumber: 0 } },
        ],
        scripts,
      ),
    ).toEqual([
      { function: 'crunchReport', file: '/app/esm dir/report.mjs', line: 8, column: 3 },
      { function: 'readFileSync', file: 'node:fs', line: 441, column: 1 },
      unknown,
    ]);
  });

  it("topUserFrame: the innermost frame outside Node's own code and of a known file, else the innermost", () => {
    expect(topUserFrame([internal, unknown, crunch])).toBe(crunch);
    expect(topUserFrame([internal, unknown])).toBe(internal);
    expect(topUserFrame([])).toBeUndefined();
  });

  it('describeFrame and stackText: as V8 prints them, with names for the anonymous and the unknown', () => {
    expect(describeFrame(crunch)).toBe('crunchReport (/app/report.js:8)');
    expect(describeFrame(unknown)).toBe('<anonymous> (<unknown>:1)');
    expect(stackText([internal, crunch, unknown])).toBe(
      ['    at readFileSync (node:fs:441:20)', '    at crunchReport (/app/report.js:8:3)', '    at <anonymous> (<unknown>:1:1)'].join('\n'),
    );
  });
});
