// The module uws-js-only.mjs puts in place of uWebSockets.js: the real build (by its path, which
// the hook leaves alone) with App wrapped in a JavaScript function, as a fallback build would be.
const uWS = require('../../node_modules/uWebSockets.js/uws.js');
module.exports = { ...uWS, App: (...args) => uWS.App(...args) };
