// The folders of src/ import each other in one direction only, and only through each other's
// index.ts: a cycle between two concerns (the cluster and the server, the demo and the server once
// did) makes neither readable nor testable alone, and a deep import makes a folder's insides its API.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';

const src = fileURLToPath(new URL('../../src', import.meta.url));

/** Every .ts file under `dir`. */
function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) =>
    statSync(join(dir, f)).isDirectory() ? files(join(dir, f)) : f.endsWith('.ts') ? [join(dir, f)] : [],
  );
}

/** Every import of another top folder of src/: the importing file's folder, the folder, the module path in it. */
function crossImports(): Array<{ file: string; from: string; folder: string; module: string }> {
  const found = [];
  for (const from of readdirSync(src).filter((f) => statSync(join(src, f)).isDirectory())) {
    for (const file of files(join(src, from))) {
      const depth = file.slice(src.length + 1).split('/').length - 1; // folders below src/
      const up = '\\.\\./'.repeat(depth);
      for (const m of readFileSync(file, 'utf8').matchAll(new RegExp(`from '${up}([a-z-]+)/([^']+)'`, 'g'))) {
        if (m[1] !== from) found.push({ file: file.slice(src.length + 1), from, folder: m[1], module: m[2] });
      }
    }
  }
  return found;
}

/** Top folder of src/ → the other top folders its files import from. */
function folderGraph(): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const { from, folder } of crossImports()) graph.set(from, (graph.get(from) ?? new Set()).add(folder));
  return graph;
}

/** A cycle through the graph, as its folders in order, or undefined. */
function findCycle(graph: Map<string, Set<string>>): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>();
  const walk = (node: string, path: string[]): string[] | undefined => {
    if (state.get(node) === 'open') return [...path.slice(path.indexOf(node)), node];
    if (state.get(node) === 'done') return undefined;
    state.set(node, 'open');
    for (const next of graph.get(node) ?? []) {
      const cycle = walk(next, [...path, node]);
      if (cycle) return cycle;
    }
    state.set(node, 'done');
    return undefined;
  };
  for (const node of graph.keys()) {
    const cycle = walk(node, []);
    if (cycle) return cycle;
  }
  return undefined;
}

describe('the folders of src/', () => {
  it('import each other without a cycle', () => {
    const graph = folderGraph();
    assert.ok(graph.get('server')?.has('cluster'), 'the graph was read (server imports cluster)');
    const cycle = findCycle(graph);
    assert.equal(cycle, undefined, `import cycle: ${cycle?.join(' → ')}`);
  });

  it('import another folder only through its index.ts', () => {
    const deep = crossImports().filter((i) => i.module !== 'index.js');
    assert.deepEqual(
      deep.map((i) => `${i.file} → ${i.folder}/${i.module}`),
      [],
    );
  });
});
