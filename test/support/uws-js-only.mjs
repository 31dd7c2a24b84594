// Loaded with --import: stands in for a uWebSockets.js build whose native binary did not load and
// that serves from JavaScript instead, as some builds fall back. The module it resolves to is the
// real one with App wrapped (uws-js-only.cjs); only the test of the gateway's refusal to start uses it.
import { registerHooks } from 'node:module';

const standIn = new URL('./uws-js-only.cjs', import.meta.url).href;

registerHooks({
  resolve(specifier, context, next) {
    return specifier === 'uWebSockets.js'
      ? { url: standIn, format: 'commonjs', shortCircuit: true }
      : next(specifier, context);
  },
});
