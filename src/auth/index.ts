// Authentication and tenancy at the WebSocket upgrade, and the credentials presented upstream.
export type {
  AuthDecision,
  AuthenticateOptions,
  AuthOptions,
  Authenticator,
  RefusalReason,
  UpgradeRequest,
} from './types.js';
export { REFUSAL_REASONS } from './types.js';
export { createAuthenticator } from './authenticator.js';
export { createUpstreamCredentials } from './upstream-credentials.js';
export type { ClientCredentials, UpstreamCredentials, UpstreamCredentialsOptions } from './upstream-credentials.js';
export { loadUpstreamCredentials } from './credentials-file.js';
export { isValidTenant } from './tenant.js';
export { isResumeKey } from './resume-key.js';
export { parseBearer } from './bearer.js';
