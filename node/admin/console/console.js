// The beanstalkd-ha web console (docs/console.md). Plain JavaScript, no
// framework, nothing fetched from elsewhere. It polls this node's /status and
// the cluster's queue (/api/queue, answered by the primary through this
// node) once a second. Data from the server is only ever set as text
// (textContent, SVG text nodes): a job body or a tube name is never markup.
'use strict';

const POLL_MS = 1000;
const HISTORY = 60; // samples kept for the rate charts
const $ = (id) => document.getElementById(id);
const SVG = 'http://www.w3.org/2000/svg';

const state = {
  session: { operator: false, via: null, csrf: null, login: false },
  status: null, // this node's /status
  queue: null, // /api/queue: stats (the primary's) and tubes
  queueFresh: false, // the last /api/queue answered
  totals: [], // [{t, put, reserve, del}] from stats
  tubeHist: new Map(), // name -> [{t, put, del}]
  job: null, // the job shown: {id, body: Uint8Array, stats}
};

// ---- helpers ----

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = String(text);
  return e;
}

function say(text, bad) {
  const box = $('message');
  const line = el('div', { class: bad ? 'bad' : '' }, text);
  box.append(line);
  setTimeout(() => line.remove(), bad ? 8000 : 4000);
}

async function api(method, path) {
  const init = { method, credentials: 'same-origin', headers: {} };
  if (method === 'POST') init.headers['X-CSRF-Token'] = state.session.csrf || '';
  const res = await fetch(path, init);
  const type = res.headers.get('Content-Type') || '';
  const body = type.startsWith('application/json') ? await res.json() : { text: await res.text() };
  if (res.status === 401) refreshSession();
  return { status: res.status, ok: res.ok, body };
}

function why(r) {
  return r.body.error || r.body.reply || (r.body.text || '').trim() || `HTTP ${r.status}`;
}

function fmt(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return '—';
  return typeof n === 'number' ? n.toLocaleString('en-US', { maximumFractionDigits: 1 }) : String(n);
}

// ---- who am I ----

async function refreshSession() {
  try {
    const r = await api('GET', '/api/session');
    if (r.ok) state.session = r.body;
  } catch (e) { /* the poll shows the node as unreachable */ }
  renderSession();
}

function renderSession() {
  const s = state.session;
  document.body.classList.toggle('operator', !!s.operator);
  $('who').textContent = s.operator
    ? `operator (${s.via === 'session' ? 'logged in' : s.via === 'certificate' ? 'client certificate' : 'open node'})`
    : 'read-only';
  $('login-form').hidden = s.operator || !s.login;
  $('logout').hidden = !(s.operator && s.via === 'session');
  for (const b of document.querySelectorAll('.operator-only button, button.act')) b.disabled = !s.operator;
}

async function login(ev) {
  ev.preventDefault();
  const pw = $('password').value;
  const res = await fetch('/api/login', {
    method: 'POST', credentials: 'same-origin', headers: { Authorization: `Bearer ${pw}` },
  });
  const body = await res.json().catch(() => ({}));
  $('password').value = '';
  if (!res.ok) { say(`Login refused: ${body.error || res.status}`, true); return; }
  state.session = { ...state.session, ...body };
  renderSession();
  say('Logged in');
}

async function logout() {
  await api('POST', '/api/logout');
  await refreshSession();
}

// ---- the cluster ----

// The primary's view of its standbys from its stats keys
// (cluster-standby-NAME: "state=streaming ... lag-records=0 ...").
function standbysFromStats(stats) {
  const out = [];
  for (const [k, v] of Object.entries(stats || {})) {
    if (!k.startsWith('cluster-standby-') || typeof v !== 'string') continue;
    const f = Object.fromEntries(v.split(' ').map((p) => p.split('=')));
    out.push({
      node_id: k.slice('cluster-standby-'.length), state: f.state,
      lag_records: Number(f['lag-records']), lag_bytes: Number(f['lag-bytes']),
      lag_seconds: Number(f['lag-ms']) / 1000,
    });
  }
  return out;
}

// Every node: this node's own status, the primary's view of its standbys
// (from this node's /status when it is the primary, else from the
// primary's stats read through this node), the rest as unknown.
function clusterModel() {
  const st = state.status;
  if (!st) return null;
  if (st.role === 'single') return { nodes: [{ id: 'this node', role: 'single', ready: st.ready, epoch: null }], primary: null };
  // The primary's view only while it answers: stale stats would show a
  // dead primary as alive.
  const stats = state.queue && state.queueFresh ? state.queue.stats : null;
  const primary = st.role === 'primary' ? st.node_id
    : stats && stats['cluster-role'] === 'primary' ? stats['cluster-node-id'] : st.primary;
  const standbys = st.role === 'primary' ? st.standbys : standbysFromStats(stats);
  const epoch = st.role === 'primary' ? st.epoch : stats && stats['cluster-role'] === 'primary' ? stats['cluster-epoch'] : null;
  const names = [st.node_id, ...(st.peers || []).map((p) => p.node_id)].sort();
  const nodes = names.map((id) => {
    const sb = standbys.find((s) => s.node_id === id);
    const n = { id, self: id === st.node_id, role: 'unknown', state: 'unknown', epoch: null, ready: null };
    if (id === primary) {
      n.role = 'primary';
      n.state = id === st.node_id ? (st.sync && st.sync.state) || 'primary'
        : (stats && stats['cluster-sync-state']) || 'primary';
      n.epoch = epoch;
      n.ready = id === st.node_id ? st.ready : true;
    } else if (sb) {
      n.role = sb.state === 'witness' ? 'witness' : 'standby';
      n.state = sb.state;
      n.link = sb.state;
      n.lag_records = sb.lag_records; n.lag_bytes = sb.lag_bytes; n.lag_seconds = sb.lag_seconds;
      n.epoch = sb.state === 'disconnected' ? null : epoch;
      n.ready = sb.state === 'streaming' || sb.state === 'witness';
    }
    if (n.self) {
      n.role = st.role; n.epoch = st.epoch; n.ready = st.ready; n.why = st.not_ready;
      if (st.role !== 'primary') n.state = st.primary ? `following ${st.primary}` : st.holding_clients ? 'holding clients' : 'no primary';
    }
    return n;
  });
  return { nodes, primary };
}

function roleBadge(role) {
  return role === 'primary' ? 'badge primary' : role === 'standby' || role === 'witness' ? 'badge ok'
    : role === 'unknown' ? 'badge' : 'badge warn';
}

function renderCluster() {
  const m = clusterModel();
  const tbody = $('nodes').tBodies[0];
  tbody.replaceChildren();
  const top = $('topology');
  top.replaceChildren();
  if (!m) return;
  for (const n of m.nodes) {
    tbody.append(el('tr', { 'data-node': n.id, 'data-role': n.role },
      el('td', {}, n.id + (n.self ? ' (this node)' : '')),
      el('td', {}, el('span', { class: roleBadge(n.role) }, n.role)),
      el('td', {}, fmt(n.epoch)),
      el('td', {}, n.state || '—'),
      el('td', {}, n.ready === null ? '—' : n.ready ? 'yes' : `no${n.why ? `: ${n.why}` : ''}`),
      el('td', { class: 'num' }, fmt(n.lag_records)),
      el('td', { class: 'num' }, fmt(n.lag_bytes)),
      el('td', { class: 'num' }, fmt(n.lag_seconds))));
  }
  drawTopology(top, m);
  const st = state.status;
  $('node-name').textContent = st.node_id ? `node ${st.node_id}` : 'single node';
  $('cluster-note').textContent = !m.primary ? 'No primary known: an election may be under way.'
    : st.role !== 'primary' ? `This node follows ${m.primary}; job actions go to the primary through it.` : '';
  const form = $('switchover-form');
  form.hidden = st.role !== 'primary';
  const sel = $('switchover-to');
  const targets = m.nodes.filter((n) => n.role === 'standby' && n.state === 'streaming').map((n) => n.id);
  if (sel.dataset.targets !== targets.join(',')) {
    sel.replaceChildren(...targets.map((t) => el('option', { value: t }, t)));
    sel.dataset.targets = targets.join(',');
  }
}

function drawTopology(top, m) {
  const w = 720, y0 = 40, y1 = 150, bw = 150, bh = 52;
  const primary = m.nodes.find((n) => n.role === 'primary');
  const others = m.nodes.filter((n) => n !== primary);
  const pos = new Map();
  if (primary) pos.set(primary.id, { x: w / 2, y: y0 });
  others.forEach((n, i) => pos.set(n.id, { x: (w / (others.length + 1)) * (i + 1), y: primary ? y1 : (y0 + y1) / 2 }));
  if (primary) {
    for (const n of others) {
      const a = pos.get(primary.id), b = pos.get(n.id);
      top.append(svg('line', { class: `link ${n.link || 'disconnected'}`, x1: a.x, y1: a.y + bh / 2, x2: b.x, y2: b.y - bh / 2 }));
      if (n.lag_records !== undefined) {
        top.append(svg('text', { class: 'sub', x: (a.x + b.x) / 2 + 6, y: (a.y + b.y) / 2 + 4 },
          n.link === 'disconnected' ? 'disconnected' : `${n.link}, lag ${fmt(n.lag_records)}`));
      }
    }
  }
  for (const n of m.nodes) {
    const p = pos.get(n.id);
    const down = n.link === 'disconnected' || n.role === 'unknown';
    const g = svg('g', { class: `node${n.role === 'primary' ? ' primary' : ''}${down ? ' down' : ''}`, 'data-node': n.id });
    g.append(svg('rect', { x: p.x - bw / 2, y: p.y - bh / 2, width: bw, height: bh, rx: 8 }));
    g.append(svg('text', { x: p.x, y: p.y - 4, 'text-anchor': 'middle' }, `${n.id}${n.self ? ' ★' : ''}`));
    g.append(svg('text', { class: 'sub', x: p.x, y: p.y + 14, 'text-anchor': 'middle' },
      `${n.role}${n.epoch ? ` · epoch ${n.epoch}` : ''}`));
    top.append(g);
  }
}

// ---- the queue ----

function pushSample(list, sample) {
  list.push(sample);
  while (list.length > HISTORY) list.shift();
}

function rate(list, key) {
  if (list.length < 2) return [];
  const out = [];
  for (let i = 1; i < list.length; i++) {
    const dt = (list[i].t - list[i - 1].t) / 1000;
    const d = list[i][key] - list[i - 1][key];
    out.push(dt > 0 && d >= 0 ? d / dt : 0);
  }
  return out;
}

function spark(values, w, h, big) {
  const s = svg('svg', { class: `spark${big ? ' big' : ''}`, width: w, height: h, viewBox: `0 0 ${w} ${h}` });
  const max = Math.max(1, ...values);
  const pts = values.map((v, i) => `${(i / Math.max(1, values.length - 1)) * w},${h - 1 - (v / max) * (h - 2)}`);
  s.append(svg('polyline', { points: pts.join(' ') }));
  return s;
}

function record(q) {
  const now = Date.now();
  const s = q.stats || {};
  pushSample(state.totals, {
    t: now, put: s['cmd-put'] || 0,
    reserve: (s['cmd-reserve'] || 0) + (s['cmd-reserve-with-timeout'] || 0), del: s['cmd-delete'] || 0,
  });
  for (const t of q.tubes) {
    if (!state.tubeHist.has(t.name)) state.tubeHist.set(t.name, []);
    pushSample(state.tubeHist.get(t.name), { t: now, put: t['total-jobs'] || 0, del: t['cmd-delete'] || 0 });
  }
}

function renderRates() {
  const box = $('rates');
  box.replaceChildren();
  for (const [key, title] of [['put', 'put/s'], ['reserve', 'reserve/s'], ['del', 'delete/s']]) {
    const r = rate(state.totals, key);
    box.append(el('div', { class: 'chart', 'data-rate': key },
      el('div', { class: 'title' }, `${title} (all tubes)`),
      el('div', { class: 'value' }, fmt(r.length ? r[r.length - 1] : 0)),
      spark(r, 200, 40, true)));
  }
}

function tubeActions(name, paused) {
  const kick = el('form', { class: 'kick', onsubmit: (ev) => { ev.preventDefault(); kickTube(name, ev.target.bound.value); } },
    el('input', { type: 'number', name: 'bound', min: '1', value: '1', 'aria-label': `jobs to kick in ${name}` }),
    el('button', { type: 'submit', class: 'act' }, 'Kick'));
  const pause = el('form', { class: 'pause', onsubmit: (ev) => { ev.preventDefault(); pauseTube(name, paused ? 0 : ev.target.delay.value); } },
    ...(paused ? [] : [el('input', { type: 'number', name: 'delay', min: '1', value: '60', 'aria-label': `seconds to pause ${name}` })]),
    el('button', { type: 'submit', class: 'act' }, paused ? 'Unpause' : 'Pause'));
  return el('td', {}, kick, pause);
}

function renderTubes() {
  const q = state.queue;
  const tbody = $('tubes').tBodies[0];
  tbody.replaceChildren();
  if (!q) return;
  for (const t of q.tubes) {
    const hist = state.tubeHist.get(t.name) || [];
    const paused = (t['pause-time-left'] || 0) > 0;
    const puts = rate(hist, 'put'), dels = rate(hist, 'del');
    tbody.append(el('tr', { 'data-tube': t.name },
      el('td', {}, t.name),
      ...['current-jobs-urgent', 'current-jobs-ready', 'current-jobs-reserved', 'current-jobs-delayed',
        'current-jobs-buried', 'current-waiting'].map((k) => el('td', { class: 'num', 'data-k': k }, fmt(t[k]))),
      el('td', { 'data-k': 'pause' }, paused ? `${t['pause-time-left']} s left` : 'no'),
      el('td', {}, spark(puts, 90, 22), ` ${fmt(puts.length ? puts[puts.length - 1] : 0)}`),
      el('td', {}, spark(dels, 90, 22), ` ${fmt(dels.length ? dels[dels.length - 1] : 0)}`),
      tubeActions(t.name, paused)));
  }
  $('queue-note').textContent = q.truncated ? 'Only the first 200 tubes are shown.' : '';
  const sel = $('peek-tube');
  const names = q.tubes.map((t) => t.name);
  if (sel.dataset.names !== names.join('\n')) {
    const keep = sel.value;
    sel.replaceChildren(...names.map((n) => el('option', { value: n }, n)));
    if (names.includes(keep)) sel.value = keep;
    sel.dataset.names = names.join('\n');
  }
  renderSession();
}

// ---- jobs ----

function decodeBase64(b64) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return bytes;
}

function renderJob() {
  const j = state.job;
  $('job').hidden = !j;
  if (!j) return;
  $('job-title').textContent = `Job ${j.id}`;
  const tbody = $('job-stats').tBodies[0];
  tbody.replaceChildren(...Object.entries(j.stats || {}).map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', {}, v))));
  const text = new TextDecoder('utf-8', { fatal: false }).decode(j.body);
  // eslint-disable-next-line no-control-regex
  const binary = text.includes('\uFFFD') || /[\x00-\x08\x0e-\x1f]/.test(text);
  $('job-body-note').textContent = `${j.body.length} bytes${binary ? ', not UTF-8 text: see hex' : ''}`;
  $('job-body').textContent = $('job-hex').checked
    ? Array.from(j.body, (b) => b.toString(16).padStart(2, '0')).join(' ') : text;
}

function showJob(r) {
  if (!r.ok) { say(`Job: ${why(r)}`, true); return; }
  if (!r.body.found) { state.job = null; renderJob(); say(`No job: ${r.body.reply || 'NOT_FOUND'}`); return; }
  state.job = { id: r.body.id, body: decodeBase64(r.body.body_base64), stats: r.body.stats };
  renderJob();
}

async function peek(ev) {
  ev.preventDefault();
  const tube = $('peek-tube').value;
  const st = $('peek-state').value;
  showJob(await api('GET', `/api/peek?tube=${encodeURIComponent(tube)}&state=${st}`));
}

async function jobById(ev) {
  ev.preventDefault();
  showJob(await api('GET', `/api/job?id=${encodeURIComponent($('job-id').value)}`));
}

async function act(path, done) {
  const r = await api('POST', path);
  say(r.ok ? done(r) : `Refused: ${why(r)}`, !r.ok);
  poll();
  return r;
}

function kickTube(name, bound) {
  return act(`/api/kick?tube=${encodeURIComponent(name)}&bound=${encodeURIComponent(bound)}`,
    (r) => `${name}: ${r.body.reply}`);
}

function pauseTube(name, delay) {
  return act(`/api/pause?tube=${encodeURIComponent(name)}&delay=${encodeURIComponent(delay)}`,
    (r) => `${name}: ${r.body.reply}${Number(delay) ? ` for ${delay} s` : ' (unpaused)'}`);
}

async function jobAction(kind) {
  const j = state.job;
  if (!j) return;
  if (kind === 'delete' && !window.confirm(`Delete job ${j.id}?`)) return;
  const r = await act(`/api/${kind}?id=${j.id}`, (res) => `Job ${j.id}: ${res.body.reply}`);
  if (r.ok && kind === 'delete') { state.job = null; renderJob(); }
}

async function switchover(ev) {
  ev.preventDefault();
  const to = $('switchover-to').value;
  if (!to || !window.confirm(`Hand the primary role over to ${to}?`)) return;
  const r = await api('POST', `/api/switchover?to=${encodeURIComponent(to)}`);
  say(r.ok ? `Switchover: ${why(r)}` : `Switchover refused: ${why(r)}`, !r.ok);
}

// ---- polling ----

let polling = false;
async function poll() {
  if (polling) return;
  polling = true;
  const badge = $('conn-state');
  try {
    const [s, q] = await Promise.all([
      fetch('/status', { credentials: 'same-origin' }).then((r) => r.json()),
      api('GET', '/api/queue').catch(() => null),
    ]);
    state.status = s;
    state.queueFresh = !!(q && q.ok);
    if (q && q.ok) {
      state.queue = q.body;
      record(q.body);
      $('queue-note').textContent = '';
    } else {
      $('queue-note').textContent = `The queue did not answer (the counts are the last ones seen): ${q ? why(q) : 'no connection'}`;
    }
    badge.textContent = 'live';
    badge.className = 'badge ok';
    renderCluster();
    renderRates();
    renderTubes();
  } catch (e) {
    badge.textContent = 'node unreachable';
    badge.className = 'badge bad';
  } finally {
    polling = false;
  }
}

document.addEventListener('DOMContentLoaded', () => {
  $('login-form').addEventListener('submit', login);
  $('logout').addEventListener('click', logout);
  $('peek-form').addEventListener('submit', peek);
  $('job-form').addEventListener('submit', jobById);
  $('job-hex').addEventListener('change', renderJob);
  $('job-kick').addEventListener('click', () => jobAction('kick-job'));
  $('job-delete').addEventListener('click', () => jobAction('delete'));
  $('switchover-form').addEventListener('submit', switchover);
  refreshSession();
  poll();
  setInterval(poll, POLL_MS);
});
