// Lint settings (`npm run lint`, run by `npm test` before the suite): ESLint's and typescript-eslint's
// recommended rules, without type information (a run takes about 20 s on a 2-core machine; with
// typescript-eslint's projectService it took over a minute), plus two rules that keep the code's
// shape:
// - no import cycles (import-x/no-cycle; `import type` does not count, it is gone at run time);
// - one way in: a folder of src/ is entered from outside it only through its index.ts. Files in
//   one folder import each other freely, and a file in a sub-folder imports its parent folder's
//   files freely (it is inside that folder); a sub-folder is a folder too, so src/audio/*.ts and
//   src/audio/replay/*.ts reach src/audio/transcode/ through src/audio/transcode/index.ts.
//   Files directly in src/ (main.ts, gateway.ts, config.ts) belong to no folder: anyone may import
//   them. test/ and bench/ do not follow the rule today (they reach into folders on purpose, to
//   test or measure one file): it applies to src/ only (the zones are exported, so a one-off
//   config can apply them to test/ and bench/ to count those imports).
//   test/ship/folder-imports.test.ts checks the top folders' static imports the same way, and
//   that the top folders import each other in one direction (no cycle between folders, which
//   no-cycle, a rule about files, does not see); this rule also sees `export … from` and import().
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import globals from 'globals';
import tseslint from 'typescript-eslint';

const root = import.meta.dirname;

/** Every folder under src/, as a path relative to the repository ('src/audio/transcode'). */
function folders(dir = 'src') {
  return readdirSync(join(root, dir))
    .map((name) => `${dir}/${name}`)
    .filter((path) => statSync(join(root, path)).isDirectory())
    .flatMap((path) => [path, ...folders(path)]);
}

/** What lies outside a folder: the paths beside it and beside each folder above it, up to the
 * repository's top ('src/audio/transcode' → src/audio/pacer.ts, src/audio/containers, …,
 * src/main.ts, src/server, …, test, bench, …). */
function outside(folder) {
  const paths = [];
  for (let inner = folder; inner;) {
    const dir = inner.includes('/') ? inner.slice(0, inner.lastIndexOf('/')) : '';
    for (const name of readdirSync(join(root, dir))) {
      const path = dir ? `${dir}/${name}` : name;
      if (path !== inner && name !== 'node_modules' && !name.startsWith('.')) paths.push(path);
    }
    inner = dir;
  }
  return paths;
}

/** Whether the sub-folders of src/'s folders (src/audio/containers, …) have one way in too. With
 * false the rule covers the top folders only, as test/ship/folder-imports.test.ts does: then the
 * files anywhere under src/audio/ import each other freely. */
const subFoldersAreFolders = true;

/** import-x/no-restricted-paths zones: for each folder, importing any of its files (or its
 * sub-folders' files) from outside it is refused, except its index.ts. */
const oneWayIn = folders()
  .filter((folder) => subFoldersAreFolders || folder.split('/').length === 2)
  .map((folder) => ({
    target: outside(folder),
    from: folder,
    except: ['index.ts'],
    message: `From outside ${folder}/, import it through ${folder}/index.ts (one way in).`,
  }));

export default defineConfig(
  {
    ignores: ['dist/', 'coverage/', '.runtime/', '.tmp/', 'bench/results/'],
  },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    languageOptions: { globals: globals.node },
    plugins: { 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts', '.mts', '.cts', '.js', '.mjs', '.cjs'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts', '.mts', '.cts'] },
      // Node's resolution, with TypeScript's rule that an import of './x.js' means './x.ts' when
      // that is the file there (the repository writes its imports so: '../audio/index.js').
      'import-x/resolver-next': [
        createNodeResolver({
          extensions: ['.ts', '.mts', '.cts', '.js', '.mjs', '.cjs', '.json', '.node'],
          extensionAlias: { '.js': ['.ts', '.js'], '.mjs': ['.mts', '.mjs'], '.cjs': ['.cts', '.cjs'] },
        }),
      ],
    },
    rules: {
      // Guards the two rules below: an import the resolver cannot follow would hide a cycle or a
      // deep import, so it is an error of its own (tsc reports the same imports when they are wrong).
      'import-x/no-unresolved': 'error',
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      // Unused names prefixed with _ are deliberate (a callback's unused argument).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_' },
      ],
    },
  },
  {
    files: ['src/**'],
    rules: {
      'import-x/no-restricted-paths': ['error', { basePath: root, zones: oneWayIn }],
      // A function a reader can see whole: 80 lines of code at most (a factory counts its closures).
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    // Tests read the JSON messages of real sockets (`m.data.isFinal`): typing each shape there would
    // restate the protocol in every test; src/ and bench/ keep the rule.
    files: ['test/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // CommonJS files (ESLint parses them as such) load with require().
    files: ['**/*.cjs'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);

export { oneWayIn };
