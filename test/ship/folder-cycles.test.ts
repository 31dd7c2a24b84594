// The folders of src/ import each other in one direction only: a cycle between two concerns (the
// cluster and the server, the demo and the server once did) makes neither readable nor testable alone.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';

const src = fileURLToPath(new URL('../../src', import.meta.url));

/** Every .ts file under `dir`. */
function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => (statSync(join(dir, f)).isDirectory() ? files(join(dir, f)) : f.endsWith('.ts') ? [join(dir, f)] : []));
}

/** Top folder of src/ → the other top folders its files import from. */
function folderGraph(): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const folder of readdirSync(src).filter((f) => statSync(join(src, f)).isDirectory())) {
    const deps = new Set<string>();
    for (const file of files(join(src, folder))) {
      const depth = file.slice(src.length + 1).split('/').length - 1; // folders below src/
      const up = '\\.\\./'.repeat(depth);
      for (const m of readFileSync(file, 'utf8').matchAll(new RegExp(`from '${up}([a-z-]+)/`, 'g'))) if (m[1] !== folder) deps.add(m[1]);
    }
    graph.set(folder, deps);
  }
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
});
