// One production command: the image's CMD is package.json's start:prod (which the load benchmark
// runs), node flags included, so what is measured is what ships.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'vitest';
import { execForm, parseDockerfile } from './dockerfile.js';

const root = new URL('../../', import.meta.url);

describe('the production command', () => {
  it('the Dockerfile CMD runs exactly start:prod', () => {
    const cmd = parseDockerfile(readFileSync(new URL('Dockerfile', root), 'utf8'))
      .filter((i) => i.keyword === 'CMD')
      .at(-1);
    const startProd: string = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')).scripts['start:prod'];
    assert.equal(`exec ${execForm(cmd?.args, 'CMD').join(' ')}`, startProd);
  });
});
