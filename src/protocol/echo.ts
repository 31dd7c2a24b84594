// The one way client input is quoted in an error `details` or a config `reason`: short, escaped, and
// with its real length when cut, so a 10 MB value costs a few dozen bytes and can't forge log lines.

/** Characters of client input an error may quote. */
export const ECHO_MAX_CHARS = 40;

// JSON.stringify escapes quotes, backslashes and C0 controls; these it leaves raw: DEL and C1
// controls, line/paragraph separators, and the bidi controls that reorder text when displayed.
const UNSAFE = /[\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const hex4 = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
const quote = (s: string) => JSON.stringify(s).replace(UNSAFE, hex4);

/** `"summary"`, or `"aaaa…" (10485760 chars)` when longer than ECHO_MAX_CHARS. */
export function echo(input: string): string {
  if (input.length <= ECHO_MAX_CHARS) return quote(input);
  const last = input.charCodeAt(ECHO_MAX_CHARS - 1);
  const end = last >= 0xd800 && last <= 0xdbff ? ECHO_MAX_CHARS - 1 : ECHO_MAX_CHARS; // keep surrogate pairs whole
  return `${quote(`${input.slice(0, end)}…`)} (${input.length} chars)`;
}
