// Test support: what a client was told, read from the messages it received.

export type Final = { start: number; end: number; text: string };

/** The final transcripts among a client's messages, in arrival order, on either endpoint:
 *  /transcribe's `{ data: { isFinal, start, end, text } }` and /streams' `{ data: [{ final, time, transcript }] }`. */
export function finals(messages: Array<Record<string, any>>): Final[] {
  return messages.flatMap((m): Final[] => {
    if (m.type !== 'transcript') return [];
    if (!Array.isArray(m.data))
      return m.data.isFinal ? [{ start: m.data.start, end: m.data.end, text: m.data.text }] : [];
    return m.data
      .filter((d: { final: boolean }) => d.final)
      .map((d: { time: { start: number; end: number }; transcript: string }) => ({
        start: d.time.start,
        end: d.time.end,
        text: d.transcript,
      }));
  });
}
