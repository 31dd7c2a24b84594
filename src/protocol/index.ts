// The protocol as code: everything the gateway knows about the messages on both sockets.
//   endpoint.ts          Endpoint, ENDPOINTS, isEndpoint: the two sockets (/transcribe, /streams)
//   errors.ts            the one catalogue of gateway errors (gatewayError, errorMessage)
//   client-messages.ts   parseClientMessage: client text frames (config, flush, end)
//   validate-config.ts   validateConfig: per-endpoint config validation with reasons naming the field
//   config-bounds.ts     what any config may carry (depth, sizes, lengths), unknown fields included
//   echo.ts              echo: the one way client input is quoted in an error or reason
//   transcribe-config.ts / streams-config.ts / commands.ts / config-common.ts
//                        the zod schemas of the configuration (docs/protocol.md, 'Configuration')
//   reasons.ts           human zod messages and field paths ("configuration.commands[2].phrases: ...")
//   audio-format.ts      parseAudioFormat, isUpstreamAudioFormat: the MIME types the upstream takes
//                        (docs/protocol.md, 'Accepted audio formats')
//   server-messages.ts   serverMessages: config status, flushed, usage, ended in the upstream's shapes
//   upstream-type.ts     upstreamMessageType: hot-path classification of upstream messages
//   frame-limit.ts       UPSTREAM_MAX_FRAME_BYTES: the upstream's limit on one audio frame
//   timeline.ts          createTimeline: one client timeline across upstream sessions (offset, repeated finals)
export * from './errors.js';
export { parseClientMessage, oversizedText, clientMessageSchema, MAX_CLIENT_TEXT_BYTES } from './client-messages.js';
export { echo, ECHO_MAX_CHARS } from './echo.js';
export type { ClientMessage, ClientMessageType, ParsedClientMessage } from './client-messages.js';
export { validateConfig } from './validate-config.js';
export type { ConfigValidation, ValidateConfigOptions } from './validate-config.js';
export { ENDPOINTS, isEndpoint } from './endpoint.js';
export type { Endpoint } from './endpoint.js';
export { transcribeConfigSchema } from './transcribe-config.js';
export type { TranscribeConfig } from './transcribe-config.js';
export { streamsConfigSchema } from './streams-config.js';
export type { StreamsConfig } from './streams-config.js';
export { parseAudioFormat, isUpstreamAudioFormat } from './audio-format.js';
export type { AudioFormat } from './audio-format.js';
export { serverMessages, configTimeoutType } from './server-messages.js';
export type { ConfigStatusType, ConfigStatusExtra, ConfigStatusMessage } from './server-messages.js';
export { upstreamMessageType } from './upstream-type.js';
export { UPSTREAM_MAX_FRAME_BYTES } from './frame-limit.js';
export { CLOSE } from './close-codes.js';
export { createTimeline, holdsNoFinal } from './timeline.js';
export type { Timeline } from './timeline.js';
