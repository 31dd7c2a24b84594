// What the replay buffer (../replay.ts) needs from each container, the replay/ folder's one way in:
// which units are initialization data, where a replay may start, and how to rewrite timestamps so a
// replayed stream starts at 0 (WebM, Ogg; other containers are replayed as they are).
export { otherFormat, type Group, type ReplayFormat } from './format.js';
export { KeptGroup } from './kept-group.js';
export { oggFormat } from './ogg.js';
export { webmFormat } from './webm.js';
