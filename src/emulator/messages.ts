// Server messages in the upstream's exact shapes (docs/protocol.md, 'Server messages'). The text
// says plainly that it comes from the emulator, not from speech recognition.
import { randomUUID } from 'node:crypto';

const r2 = (s: number) => Math.round(s * 1000) / 1000;
const segText = (n: number, start: number, end: number, interim = false) =>
  `[emulator] ${interim ? 'interim ' : ''}segment ${n} (${start.toFixed(2)}-${end.toFixed(2)} s)`;

export function transcribeTranscript(n: number, start: number, end: number, isFinal: boolean) {
  const text = segText(n, start, end, !isFinal);
  return { type: 'transcript', data: { text, rawTranscriptText: text, start: r2(start), end: r2(end), isFinal } };
}

export function streamsTranscript(n: number, start: number, end: number, diarize: boolean) {
  return {
    type: 'transcript',
    data: [
      {
        id: randomUUID(),
        transcript: segText(n, start, end),
        final: true,
        speakerId: diarize ? 0 : -1,
        participant: { channel: 0 },
        time: { start: r2(start), end: r2(end) },
      },
    ],
  };
}

export function commandMessage(id: string, phrase: string, start: number, end: number) {
  return { type: 'command', data: { id, variables: {}, rawTranscriptText: phrase, start: r2(start), end: r2(end) } };
}

const OTHER_GROUP_ID = '00000000-0000-4000-8000-000000000001';

export function factsMessage(n: number, mediaSeconds: number, nowMs: number) {
  const at = new Date(nowMs).toISOString();
  return {
    type: 'facts',
    fact: [
      {
        id: randomUUID(),
        text: `[emulator] fact ${n} at ${mediaSeconds.toFixed(2)} s of media (not derived from speech)`,
        group: 'other',
        groupId: OTHER_GROUP_ID,
        isDiscarded: false,
        source: 'core',
        createdAt: at,
        updatedAt: at,
      },
    ],
  };
}

export const credits = (mediaSeconds: number, perSecond: number) =>
  Math.round(mediaSeconds * perSecond * 10_000) / 10_000;
