export { Session, type ClientSink, type SessionDeps, type SessionInfo, type SessionSettings } from './session.js';
export { type Restore, type SessionSnapshot } from './resume.js';
export {
  transition,
  initialState,
  CLOSE,
  HANDED_OVER_REASON,
  type SessionState,
  type SessionEvent,
  type Effect,
  type Outcome,
  type Phase,
} from './machine.js';
