// One load-generator process (the parent forks several so load generation is never the
// bottleneck). Keeps `sessions` real-time dictations live: each sends config, then its audio
// pieces at real time (a flush every FLUSH_EVERY pieces), then end; a session that finishes
// its audio before the stop time is followed by a new one. Measures, for pieces sent inside the
// hold window, the time from a piece's send to the first transcript whose end reaches into it;
// and checks each session's final transcripts tile its media once (none lost, none repeated).
// Input (IPC message): { url, sessions, offset, total, startAt, holdFrom, stopAt, config, pieces: [{ file, start, end }],
// mediaEnds (media seconds after each piece), tolerance (seconds a transcoder may hold back) }.
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';

const PIECE_MS = 250;
const FLUSH_EVERY = 12;
const EPS = 0.0015; // transcripts carry times rounded to 1 ms

process.once('message', (job) => run(job).then((r) => process.send(r, () => process.exit(0))));

async function run(job) {
  const files = new Map();
  const read = (f) => files.get(f) ?? files.set(f, readFileSync(f)).get(f);
  const pieces = job.pieces.map((p) => read(p.file).subarray(p.start, p.end));
  const r = {
    started: 0,
    accepted: 0,
    completed: 0,
    errors: {},
    latencies: [],
    lost: 0,
    repeated: 0,
    finals: 0,
    notes: [],
  };
  const fail = (kind) => {
    r.errors[kind] = (r.errors[kind] ?? 0) + 1;
  };
  const loops = [];
  for (let i = 0; i < job.sessions; i++) {
    const at = job.startAt + ((job.offset + i) / job.total) * (job.holdFrom - job.startAt);
    loops.push(
      sleepUntil(at).then(async () => {
        while (Date.now() < job.stopAt) {
          r.started++;
          const ok = await session(job, pieces, r, fail).catch((e) => fail(String(e.message).slice(0, 60)));
          if (!ok) await sleepUntil(Date.now() + 250); // a refusing peer is not hammered
        }
      }),
    );
  }
  await Promise.all(loops);
  return r;
}

const sleepUntil = (t) => new Promise((res) => setTimeout(res, Math.max(0, t - Date.now())));

function session(job, pieces, r, fail) {
  return new Promise((resolve) => {
    const ws = new WebSocket(job.url, { perMessageDeflate: false });
    const pending = []; // [mediaEnd, sentAt, measured]
    const finals = [];
    let sent = 0;
    let timer;
    let began = 0;
    let ended = false;
    const deadline = setTimeout(
      () => {
        fail('timeout');
        ws.terminate();
      },
      job.mediaEnds.at(-1) * 1000 + 30_000,
    );
    ws.on('error', () => undefined);
    ws.on('open', () => ws.send(JSON.stringify({ type: 'config', configuration: job.config })));
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      const m = JSON.parse(data.toString());
      if (m.type === 'CONFIG_ACCEPTED') {
        r.accepted++;
        began = performance.now() - job.mediaEnds[0] * 1000;
        sendPiece();
      } else if (m.type === 'transcript') {
        covered(m.data.end);
        if (m.data.isFinal) finals.push([m.data.start, m.data.end]);
      } else if (m.type === 'ended') {
        ended = true;
      } else if (m.type === 'error' || /^CONFIG_/.test(m.type)) {
        fail(m.type === 'error' ? `error ${m.error?.id ?? ''}` : m.type);
      }
    });
    ws.on('close', (code) => {
      clearTimeout(timer);
      clearTimeout(deadline);
      if (!ended || code !== 1000) {
        fail(`close ${code}${ended ? '' : ' before ended'}`);
        return resolve(false);
      }
      r.completed++;
      checkFinals(finals, sent ? job.mediaEnds[sent - 1] : 0);
      resolve(true);
    });

    // Piece k leaves when a live recorder would have it: at its media end (real time, whatever
    // the browser's piece length); the schedule is absolute so timer lateness does not accumulate.
    function sendPiece() {
      const now = Date.now();
      if (sent === pieces.length || now >= job.stopAt) {
        pending.length = 0; // what answers `end` is timed from it, not from the last piece
        return ws.send('{"type":"end"}');
      }
      ws.send(pieces[sent]);
      pending.push([job.mediaEnds[sent], performance.now(), now >= job.holdFrom]);
      sent++;
      if (sent % FLUSH_EVERY === 0) ws.send('{"type":"flush"}');
      const next = sent < pieces.length ? job.mediaEnds[sent] * 1000 : job.mediaEnds[sent - 1] * 1000 + PIECE_MS;
      timer = setTimeout(sendPiece, Math.max(0, began + next - performance.now()));
    }

    // A reply is timed from the send of the piece that completed the media it reports (the first
    // piece reaching its end): pieces whose media the upstream has not answered yet are waiting on
    // its output cadence, not on the path, and counting them would measure the upstream.
    function covered(end) {
      const t = performance.now();
      while (pending.length && pending[0][0] < end - job.tolerance - EPS) pending.shift();
      const piece = pending[0];
      if (!piece || piece[0] > end + job.tolerance + EPS) return;
      pending.shift();
      if (piece[2]) r.latencies.push(t - piece[1]);
    }

    // Finals must tile [0, media sent] in order: a gap is a lost final, an overlap a repeated one.
    function checkFinals(list, media) {
      let at = 0;
      const note = (what) => {
        if (r.notes.length < 5) r.notes.push(`${what} at ${at} of ${media}: ${JSON.stringify(list.slice(-4))}`);
      };
      for (const [start, end] of list) {
        if (start > at + EPS) {
          r.lost++;
          note('gap');
        } else if (start < at - EPS) {
          r.repeated++;
          note('overlap');
        }
        at = Math.max(at, end);
      }
      if (at < media - job.tolerance - EPS) {
        r.lost++;
        note('tail missing');
      }
      r.finals += list.length;
    }
  });
}
