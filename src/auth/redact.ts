// Strips credentials from anything that might reach a log: URLs and query strings
// (token=..., access_token=..., client_secret=...), Sec-WebSocket-Protocol pair values
// ("Authorization, Bearer%20..."), and anything shaped like a JWT.

const PARAM = /([?&;]|^)((?:access_|id_|refresh_)?token|client_secret|authorization|password)=([^&#\s]*)/gi;
const PROTOCOL_PAIR = /(authorization\s*,\s*)([^,]*)/gi;
const BEARER = /(bearer)(%20|\+|\s)+[^\s&,#]+/gi;
const JWT = /eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]*)?/g;

export function redactUrl(url: string): string {
  return url
    .replace(PARAM, '$1$2=[redacted]')
    .replace(PROTOCOL_PAIR, '$1[redacted]')
    .replace(BEARER, '$1 [redacted]')
    .replace(JWT, '[redacted]');
}
