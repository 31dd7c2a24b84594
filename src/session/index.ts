export { Session, type ClientSink, type SessionDeps, type SessionInfo, type SessionSettings } from './session.js';
export { transition, initialState, CLOSE, type SessionState, type SessionEvent, type Effect, type Outcome, type Phase } from './machine.js';
