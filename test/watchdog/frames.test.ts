import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SourceMapper, type BlockedFrame } from '../../src/watchdog/frames.js';

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
