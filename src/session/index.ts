export { Session, type ClientSink, type SessionDeps, type SessionInfo, type SessionSettings } from './session.js';
export { HANDED_OVER_REASON, type Restore, type SessionSnapshot } from './resume.js';
export { transition, initialState, CLOSE, type SessionState, type SessionEvent, type Effect, type Outcome, type Phase } from './machine.js';
