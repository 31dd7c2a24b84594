// HTTP answers on uWS, shared by the upgrade gate, the routes and the demo: a status with a short
// JSON body, a counted refusal, uWS's rule for asynchronous handlers, and what its WebSocket send
// returns for a dropped message.
// A folder of its own so that server/, cluster/ and demo/ all stand on it without importing each other.
import type uWS from 'uWebSockets.js';
import { gatewayError, type GatewayError } from '../protocol/index.js';
import { metrics, type Logger } from '../telemetry/index.js';

/** uWS's ws.send result when the message was dropped (the socket is over its maxBackpressure). */
export const SEND_DROPPED = 2;

const STATUS_TEXT: Record<number, string> = {
  200: 'OK',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

export function sendJson(res: uWS.HttpResponse, status: number, body: unknown): void {
  res.cork(() => {
    res.writeStatus(`${status} ${STATUS_TEXT[status] ?? ''}`.trim());
    res.writeHeader('content-type', 'application/json');
    res.end(JSON.stringify(body));
  });
}

/** A refused upgrade: counted by reason, answered with the error's status (body `{error}`). */
export function refuse(res: uWS.HttpResponse, err: GatewayError, reason: string): void {
  metrics.refusals.inc({ reason });
  sendJson(res, err.status, { error: err });
}

/** A refused plain HTTP request: counted by reason, answered as the ops API answers (`{type, error}`). */
export function refuseRequest(res: uWS.HttpResponse, err: GatewayError, reason: string): void {
  metrics.refusals.inc({ reason });
  sendJson(res, err.status, { type: 'error', error: err });
}

/** Runs an async handler with uWS's abort rule: never touch `res` after the client went away. */
export function asyncHttp(log: Logger, res: uWS.HttpResponse, work: (aborted: () => boolean) => Promise<void>): void {
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  work(() => aborted).catch((err: Error) => {
    log.error({ err: err.message }, 'request failed');
    if (!aborted) sendJson(res, 500, { type: 'error', error: gatewayError('INTERNAL', 'internal error') });
  });
}
