export { Session } from './session.js';
export { type ClientSink } from './client-output.js';
export { type Link, type SessionDeps, type SessionInfo, type SessionSettings } from './types.js';
export { type LifecycleEvent } from './lifecycle.js';
export { coverageOf } from './coverage.js';
export { type Restore, type SessionSnapshot } from './resume.js';
export {
  transition,
  initialState,
  HANDED_OVER_REASON,
  type SessionState,
  type SessionEvent,
  type Effect,
  type Outcome,
  type Phase,
} from './machine.js';
