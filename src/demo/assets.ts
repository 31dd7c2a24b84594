// The browser demo's three files, kept as strings so the TypeScript build carries them with no copy
// step. Plain HTML/CSS/JS, no framework: the microphone goes through MediaRecorder to the gateway's
// /transcribe socket. Server data is only ever written with textContent.

export const DEMO_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>speech-gateway demo</title>
<link rel="stylesheet" href="/demo/app.css">
<script src="/demo/app.js" defer></script>
</head>
<body>
<h1>speech-gateway demo</h1>
<p class="note">Dictation from your microphone through this gateway. The upstream is the embedded
<strong>emulator</strong>: its transcripts are numbered one-second segments of the audio it received, not speech recognition.</p>
<div class="controls">
<button id="start" type="button">Start</button>
<button id="flush" type="button" disabled>Flush</button>
<button id="end" type="button" disabled>End</button>
</div>
<p>Status: <span id="status">idle</span></p>
<p>Session: <span id="session">none</span></p>
<h2>Transcript</h2>
<ol id="finals"></ol>
<p id="interim" class="interim"></p>
<h2>Usage</h2>
<p>Credits: <span id="usage">none yet</span></p>
<p>Transcript coverage: <span id="coverage">at the end</span></p>
<h2>Events</h2>
<ol id="events" class="events"></ol>
</body>
</html>
`;

export const DEMO_CSS = `body { font: 16px/1.4 system-ui, sans-serif; max-width: 46rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.1rem; margin-top: 1.5rem; }
.note { background: #fff6d6; padding: .5rem .75rem; border-radius: 4px; }
.controls button { font-size: 1rem; padding: .4rem 1.2rem; margin-right: .5rem; }
#status { font-weight: bold; }
.interim { color: #777; font-style: italic; min-height: 1.4em; }
.events { font: 12px/1.3 ui-monospace, monospace; color: #555; max-height: 12rem; overflow-y: auto; }
.error { color: #b00020; }
`;

// Browser JavaScript (no template literals inside: this is one).
export const DEMO_JS = `'use strict';
(function () {
  var TIMESLICE_MS = 250;
  var MIME = 'audio/webm;codecs=opus';
  var BACKLOG_BYTES = 4 * 1024 * 1024;
  var RECONNECT_ATTEMPTS = 5;
  var MAX_EVENTS = 200;
  var $ = function (id) { return document.getElementById(id); };
  // live: the socket's config was accepted, audio may go; error: the gateway ended the session with one.
  var s = fresh(null);
  function fresh(stream) {
    return { stream: stream, ws: null, recorder: null, key: randomKey(), backlog: [], backlogStart: 0, produced: 0,
      live: false, ended: false, error: '', flushWanted: false, endWanted: false, attempts: 0 };
  }

  function show(id, text, isError) { var el = $(id); el.textContent = text; el.classList.toggle('error', !!isError); }
  function event(text) {
    var li = document.createElement('li');
    li.textContent = new Date().toLocaleTimeString() + ' ' + text;
    var list = $('events');
    list.appendChild(li);
    while (list.children.length > MAX_EVENTS) list.removeChild(list.firstChild);
    list.scrollTop = list.scrollHeight;
  }
  function buttons(recording) { $('start').disabled = recording; $('flush').disabled = !recording; $('end').disabled = !recording; }
  function fail(text) { show('status', text, true); event(text); stopRecorder(); buttons(false); }
  function stopRecorder() {
    if (s.recorder && s.recorder.state !== 'inactive') s.recorder.stop();
    if (s.recorder) s.recorder.stream.getTracks().forEach(function (t) { t.stop(); });
  }
  function randomKey() {
    var b = new Uint8Array(18);
    crypto.getRandomValues(b);
    return btoa(String.fromCharCode.apply(null, b)).replace(/\\+/g, '-').replace(/\\//g, '_');
  }

  // The gateway hands out a development token (tenant base, scope openid transcribe) from the emulator.
  function token() {
    return fetch('/demo/token', { method: 'POST' }).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) throw new Error('token: ' + ((body.error && body.error.details) || ('HTTP ' + r.status)));
        return body.access_token;
      });
    });
  }

  function connect() {
    return token().then(function (jwt) {
      var url = new URL('/audio-bridge/v2/transcribe', location.href);
      url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
      url.search = new URLSearchParams({ 'tenant-name': 'base', token: 'Bearer ' + jwt, resume: s.key, notices: 'true' }).toString();
      var ws = new WebSocket(url.toString());
      s.ws = ws;
      ws.onopen = function () {
        event('connected; sending config');
        ws.send(JSON.stringify({ type: 'config', configuration: { primaryLanguage: 'en', interimResults: true, audioFormat: MIME } }));
      };
      ws.onmessage = function (m) { if (typeof m.data === 'string') onMessage(JSON.parse(m.data)); };
      ws.onclose = function (e) { onClose(ws, e.code, e.reason); };
    });
  }

  function onMessage(m) {
    if (m.type === 'CONFIG_ACCEPTED') return onAccepted(m);
    if (m.type === 'transcript' && m.data) return onTranscript(m.data);
    if (m.type === 'flushed') return event('flushed');
    if (m.type === 'delta_usage') { show('usage', m.credits + ' (so far)'); return event('delta_usage ' + m.credits); }
    if (m.type === 'usage') { show('usage', String(m.credits)); return event('usage ' + m.credits); }
    if (m.type === 'ended') { s.ended = true; show('status', 'ended'); return event('ended'); }
    if (m.type === 'notice' && m.notice) return onNotice(m.notice);
    if (m.type === 'error' && m.error) { s.error = m.error.id + ': ' + m.error.details; return event('error ' + s.error); }
    event(String(m.type) + (m.reason ? ': ' + m.reason : ''));
  }

  // The session's coverage at its end: how much of its speech the final transcripts cover.
  function onNotice(n) {
    event('notice ' + n.id + ': ' + n.details);
    var c = n.coverage;
    if (n.id !== 'TRANSCRIPT_COVERAGE' || !c) return;
    var pct = c.speechSeconds > 0 ? Math.round((100 * c.transcribedSpeechSeconds) / c.speechSeconds) + '%' : 'no speech';
    show('coverage', pct + ' of ' + c.speechSeconds.toFixed(1) + ' s of speech transcribed' + (c.gaps.length ? ', ' + c.gaps.length + ' gaps' : ''));
  }

  function onAccepted(m) {
    s.attempts = 0;
    s.live = true;
    if (!s.recorder) { event('config accepted; recording'); return startRecorder(m.sessionId); }
    if (m.resumed !== true) { s.error = 'the session could not be resumed (it ended, or its grace period passed)'; return s.ws.close(1000); }
    event('resumed; the gateway has ' + m.audioBytes + ' bytes, sending the rest');
    show('status', 'recording');
    resend(Number(m.audioBytes));
    sendEnd();
  }

  // End goes once the recorder's last chunk went, on this socket or, after a drop, on the resumed one.
  function sendEnd() {
    if (s.endWanted && s.live) { s.endWanted = false; s.ws.send(JSON.stringify({ type: 'end' })); }
  }

  // Sends what the gateway did not get from the backlog of recent chunks (it skips to the next
  // cluster itself when bytes older than the backlog were lost).
  function resend(from) {
    var offset = s.backlogStart;
    s.backlog.forEach(function (blob) {
      var end = offset + blob.size;
      if (end > from) s.ws.send(from > offset ? blob.slice(from - offset) : blob);
      offset = end;
    });
  }

  function startRecorder(sessionId) {
    show('session', sessionId);
    var r = new MediaRecorder(s.stream, { mimeType: MIME });
    s.recorder = r;
    r.ondataavailable = function (e) { onChunk(e.data); };
    r.onstop = function () { if (!s.error && !s.ended) { s.endWanted = true; sendEnd(); } };
    r.start(TIMESLICE_MS);
    show('status', 'recording');
    buttons(true);
  }

  function onChunk(blob) {
    if (blob.size > 0) {
      s.backlog.push(blob);
      s.produced += blob.size;
      while (s.produced - s.backlogStart > BACKLOG_BYTES) s.backlogStart += s.backlog.shift().size;
      if (s.live) s.ws.send(blob);
    }
    // A flush waits for the recorder's buffered audio (requested below) so it covers what was said.
    if (s.flushWanted && s.live) { s.flushWanted = false; s.ws.send(JSON.stringify({ type: 'flush' })); }
  }

  function onTranscript(d) {
    if (!d.isFinal) return show('interim', d.text);
    var li = document.createElement('li');
    li.textContent = '[' + Number(d.start).toFixed(2) + '-' + Number(d.end).toFixed(2) + ' s] ' + d.text;
    $('finals').appendChild(li);
    show('interim', '');
  }

  // A dropped connection (not a normal end, not the gateway's 4xxx answer) comes back with the same resume key.
  function onClose(ws, code, reason) {
    if (ws !== s.ws) return;
    s.live = false;
    event('closed ' + code + (reason ? ' ' + reason : ''));
    if (s.error) return fail(s.error);
    if (s.ended || code === 1000) { stopRecorder(); buttons(false); if (!s.ended) show('status', 'closed'); return; }
    if ((code >= 4000 && code < 5000) || s.attempts >= RECONNECT_ATTEMPTS) return fail('closed ' + code + (reason ? ': ' + reason : ''));
    var wait = 500 * Math.pow(2, s.attempts++);
    show('status', 'reconnecting');
    setTimeout(function () { connect().catch(function (e) { onClose(s.ws, 1006, e.message); }); }, wait);
  }

  $('start').onclick = function () {
    $('start').disabled = true;
    show('status', 'asking for the microphone');
    navigator.mediaDevices.getUserMedia({ audio: true }).then(function (stream) {
      s = fresh(stream);
      $('finals').textContent = '';
      show('usage', 'none yet');
      show('status', 'connecting');
      return connect();
    }).catch(function (e) { fail(e.message); });
  };
  $('flush').onclick = function () { s.flushWanted = true; s.recorder.requestData(); };
  $('end').onclick = function () { buttons(false); $('start').disabled = true; show('status', 'ending'); s.recorder.stop(); };
})();
`;
