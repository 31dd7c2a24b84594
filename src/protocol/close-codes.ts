// The WebSocket close codes the gateway sends its clients, in one table: the session, the server and
// the internal hop all close with these.
// 4xxx are application codes a client can switch on.
export const CLOSE = {
  normal: 1000,
  serviceRestart: 1012, // the gateway drains: reconnect, to another instance
  internal: 1011,
  tryAgainLater: 1013, // the tenant is at its session cap
  badGateway: 1014,
  configTimeout: 4008,
  configDenied: 4400,
  configRejected: 4415,
  audioInvalid: 4422,
  clientTooSlow: 4429,
  replaced: 4409,
  flooded: 1008, // policy violation: the client sends faster than the gateway reads (server/inflow.ts)
} as const;
