// Vigil dashboard: reads the live stream (Server-Sent Events over fetch, so
// that the admin token goes in the Authorization header, never in a URL),
// draws the topology, the clones, the events and the top digests, and
// submits switchovers and drains through the admin REST API.
'use strict';

const TOKEN_KEY = 'vigil.admin.token';
const STREAM_URL = 'stream';
const API = new URL('../api/v1/', location.href);
const STALL_MS = 20000; // no byte for this long: reconnect

const STATE_COLOR = {
  ONLINE: '#2e9d4f', SHUNNED: '#d64040', OFFLINE_SOFT: '#e0a100', OFFLINE_HARD: '#8a8f98',
};

// ---- small DOM helpers (text goes through textContent, never innerHTML)

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  setAttrs(e, attrs);
  for (const k of kids) if (k != null) e.append(k);
  return e;
}

function svg(tag, attrs, ...kids) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  setAttrs(e, attrs);
  for (const k of kids) if (k != null) e.append(k);
  return e;
}

function setAttrs(e, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v == null) continue;
    e.setAttribute(k, v === true ? '' : String(v));
  }
}

const $ = (sel, root = document) => root.querySelector(sel);

// ---- sign-in
//
// sessionStorage keeps the whole Authorization value: "Bearer <token>"
// for the admin token, "Basic <base64>" for admin.user and
// admin.password.

function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

function authHeaders(extra) {
  const h = Object.assign({}, extra);
  const t = getToken();
  if (t) h.Authorization = t;
  return h;
}

// basicAuth is the Authorization value for a user and password (UTF-8).
function basicAuth(user, pass) {
  const bytes = new TextEncoder().encode(user + ':' + pass);
  let bin = '';
  bytes.forEach((b) => { bin += String.fromCharCode(b); });
  return 'Basic ' + btoa(bin);
}

// A link may carry the token in the fragment (#token=...), which browsers
// never send to the server; it is moved to sessionStorage at once.
function tokenFromFragment() {
  const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (!m) return;
  sessionStorage.setItem(TOKEN_KEY, 'Bearer ' + decodeURIComponent(m[1]));
  history.replaceState(null, '', location.pathname + location.search);
}

let loginWaiters = [];

// askToken shows the sign-in form and resolves once credentials were
// entered.
function askToken(why) {
  const box = $('#login');
  const err = $('#login-error');
  err.textContent = why || '';
  err.hidden = !why;
  box.hidden = false;
  $('#token-input').focus();
  return new Promise((resolve) => loginWaiters.push(resolve));
}

// tokenEntered closes the sign-in form and wakes whoever waited for it.
function tokenEntered() {
  $('#login').hidden = true;
  $('#signout').hidden = false;
  const w = loginWaiters;
  loginWaiters = [];
  w.forEach((f) => f());
}

function setupLogin() {
  $('#login-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    // With a user name the secret is admin.password (basic auth),
    // without one it is the admin token.
    const user = $('#user-input').value.trim();
    const v = user ? $('#token-input').value : $('#token-input').value.trim();
    if (!v) return;
    sessionStorage.setItem(TOKEN_KEY, user ? basicAuth(user, v) : 'Bearer ' + v);
    $('#token-input').value = '';
    tokenEntered();
  });
  $('#signout').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    $('#signout').hidden = true;
    restartStream();
  });
  $('#signout').hidden = !getToken();
}

// ---- the stream

let streamAbort = null;

function setConn(state, text) {
  const c = $('#conn');
  c.dataset.state = state;
  c.textContent = text || state;
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

function restartStream() {
  if (streamAbort) streamAbort.abort();
}

async function streamLoop() {
  let backoff = 500;
  for (;;) {
    const ctl = new AbortController();
    streamAbort = ctl;
    let watchdog = null;
    try {
      const res = await fetch(STREAM_URL, { headers: authHeaders(), cache: 'no-store', signal: ctl.signal });
      if (res.status === 401) {
        setConn('unauthorized', 'token needed');
        await askToken(getToken() ? 'Those credentials were refused.' : '');
        continue;
      }
      if (!res.ok) throw new Error('HTTP ' + res.status);
      setConn('live', 'live');
      backoff = 500;
      let last = Date.now();
      watchdog = setInterval(() => {
        if (Date.now() - last > STALL_MS) ctl.abort();
      }, 2000);
      await readSSE(res.body, () => { last = Date.now(); }, (name, data) => {
        if (name === 'snapshot') render(JSON.parse(data));
      });
      throw new Error('stream ended');
    } catch (e) {
      if (ctl.signal.aborted && !getToken()) continue; // signed out
      setConn('reconnecting', 'reconnecting…');
      $('#conn').title = String(e && e.message || e);
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 5000);
    } finally {
      if (watchdog) clearInterval(watchdog);
    }
  }
}

// readSSE parses text/event-stream from a fetch body.
async function readSSE(body, onBytes, onEvent) {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    onBytes();
    buf += dec.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let name = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line === '' || line.startsWith(':')) continue; // comment: heartbeat
        const c = line.indexOf(':');
        const field = c < 0 ? line : line.slice(0, c);
        let v = c < 0 ? '' : line.slice(c + 1);
        if (v.startsWith(' ')) v = v.slice(1);
        if (field === 'event') name = v;
        else if (field === 'data') data.push(v);
      }
      if (data.length) onEvent(name, data.join('\n'));
    }
  }
}

// ---- formatting

function fmtLag(v) {
  if (v == null) return '–';
  return v < 10 ? v.toFixed(1) + ' s' : Math.round(v) + ' s';
}

function fmtUs(us) {
  if (us == null) return '–';
  if (us < 1000) return us + ' µs';
  if (us < 1e6) return (us / 1000).toFixed(us < 1e4 ? 2 : 1) + ' ms';
  return (us / 1e6).toFixed(2) + ' s';
}

function fmtCount(n) {
  if (n == null) return '–';
  if (n < 1e4) return String(n);
  if (n < 1e6) return (n / 1e3).toFixed(1) + 'k';
  return (n / 1e6).toFixed(2) + 'M';
}

function fmtTime(iso) {
  const d = new Date(iso);
  return isNaN(d) ? '' : d.toLocaleTimeString([], { hour12: false });
}

// ---- rendering

let last = null; // the last snapshot

function render(snap) {
  last = snap;
  const servers = snap.servers || [];
  $('#updated').textContent = 'updated ' + fmtTime(snap.time);
  $('#no-servers').hidden = servers.length > 0;
  if (servers.length === 0) $('#no-servers').textContent = 'No servers.';
  trackServerRates(servers, snap.time);
  renderClusters(servers);
  renderEvents(snap.events || []);
  renderDigests(snap.digests || [], snap.digests_error, snap.time);
  renderCoordination(snap.coordination);
  renderClones(snap.clones);
  renderShards(snap.shards);
}

// renderCoordination shows this instance's lease, the other instances
// and, per cluster, the acting instance, the writer record's term and
// whether this instance routes writes.
function renderCoordination(c) {
  const box = $('#coordination');
  box.hidden = !(c && c.enabled);
  if (box.hidden) return;
  const l = c.lease || {};
  const others = (l.instances || []).map((i) => i.name).join(', ') || 'none';
  const valid = l.valid_for_ns ? ` (sure for ${(l.valid_for_ns / 1e9).toFixed(1)} s)` : '';
  setText($('#coord-lease'), `this instance: ${l.instance} · lease ${l.lease}${valid} · registered: ${others}`);
  $('#coord-lease').dataset.lease = l.lease || '';
  const items = Object.entries(c.clusters || {}).map(([name, cs]) => {
    const r = cs.record || {};
    const fenced = (r.fenced || []).length ? ` · fenced ${r.fenced.join(', ')}` : '';
    const li = el('li', { 'data-cluster': name, 'data-writes': cs.writes === 'allowed' ? 'allowed' : 'refused' },
      `${name}: acting ${cs.leader || '?'}${cs.acting ? ' (this instance)' : ''} · term ${r.term ?? '?'} · writer ${r.writer || '—'} (${r.phase || '?'})${fenced} · writes here: ${cs.writes}`);
    // What each live instance sees of each server: an automatic failover
    // needs every one of them to have lost the primary.
    const views = (cs.views || []).map((v) => el('li', { class: 'coord-view', 'data-instance': v.instance },
      `${v.instance} sees: ` + Object.entries(v.servers || {}).sort(([a], [b]) => a.localeCompare(b))
        .map(([srv, sv]) => `${srv} ${sv.ok ? 'answers' : 'fails (' + (sv.failure || 'no check yet') + ')'}`).join(', ')));
    if (views.length) li.append(el('ul', { class: 'coord-views' }, ...views));
    return li;
  });
  $('#coord-clusters').replaceChildren(...items);
}

// ---- clones

function fmtBytes(n) {
  if (n == null) return '–';
  if (n < 1024) return n + ' B';
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024, i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return v.toFixed(v < 10 ? 1 : 0) + ' ' + units[i];
}

function fmtDuration(s) {
  if (s == null || s < 0) return '–';
  if (s < 60) return Math.round(s) + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + Math.round(s % 60) + ' s';
  return Math.floor(s / 3600) + ' h ' + Math.round((s % 3600) / 60) + ' min';
}

// renderClones lists the running clones, then the finished ones newest
// first (GET /api/v1/clone). c is absent when this Vigil does not clone.
function renderClones(c) {
  const box = $('#clones');
  box.hidden = !c;
  if (!c) return;
  const running = c.running || [];
  const finished = (c.finished || []).slice().reverse();
  const all = running.concat(finished);
  $('#no-clones').hidden = all.length > 0;
  const rows = [];
  for (const p of all) {
    const streaming = p.phase === 'streaming';
    const bar = el('progress', { max: p.total_bytes > 0 ? p.total_bytes : false, title: p.total_bytes > 0 ? `${fmtBytes(p.bytes)} of about ${fmtBytes(p.total_bytes)}` : 'size unknown' });
    if (p.total_bytes > 0) bar.value = Math.min(p.bytes, p.total_bytes);
    else if (!p.running) bar.value = 0;
    const pct = p.total_bytes > 0 ? Math.min(100, Math.round(100 * p.bytes / p.total_bytes)) + '%' : '';
    const kind = p.kind ? el('span', { class: 'kind clone-kind' }, p.kind) : null;
    const restarts = p.donor_restarts ? ` (donor changed ${p.donor_restarts}×)` : '';
    const path = p.path ? ` · ${p.path}` : '';
    rows.push(el('tr', { class: 'clone', 'data-id': p.id, 'data-phase': p.phase, 'data-target': p.target, 'data-kind': p.kind || false },
      el('td', null, kind, kind ? ' ' : '', el('b', null, p.target), ` ← ${p.donor || '?'}`, el('span', { class: 'muted small' }, ` ${p.cluster || ''}${restarts}${path}`)),
      el('td', null, el('span', { class: 'phase', 'data-phase': p.phase }, p.phase)),
      el('td', { class: 'bar-col' }, bar, el('span', { class: 'pct small' }, ' ' + pct)),
      el('td', { class: 'num bytes' }, `${fmtBytes(p.bytes)} / ${p.total_bytes > 0 ? fmtBytes(p.total_bytes) : '?'}`),
      el('td', { class: 'num rate' }, p.rate_bytes_per_second > 0 ? fmtBytes(p.rate_bytes_per_second) + '/s' : '–'),
      el('td', { class: 'num eta' }, streaming ? fmtDuration(p.eta_seconds) : '–'),
      el('td', { class: 'num', title: p.started || '' }, fmtTime(p.started))));
    if (p.error) {
      rows.push(el('tr', { class: 'clone-error', 'data-id': p.id },
        el('td', { colspan: 7, class: 'error small' }, p.error)));
    }
  }
  $('#clone-list tbody').replaceChildren(...rows);
}

// ---- shards

// renderShards shows the sharded listener (GET /api/v1/shards) and the
// running or last move (GET /api/v1/shards/move). sh is absent when no
// sharded listener is configured.
function renderShards(sh) {
  const box = $('#shards');
  box.hidden = !(sh && sh.listener);
  if (box.hidden) return;
  const l = sh.listener;
  setText($('#shards-listener'), `listening on ${l.listen || '?'} · map version ${l.version ?? '?'} · ${l.sessions ?? 0} sessions`);
  const stmts = l.statements || {};
  $('#shard-clusters tbody').replaceChildren(...(l.clusters || []).map((c) =>
    el('tr', { class: 'shard-cluster', 'data-cluster': c.name },
      el('td', null, c.name), el('td', null, c.writer || '—'), el('td', { class: 'num' }, String(stmts[c.name] || 0)))));
  $('#shard-schemas tbody').replaceChildren(...(l.schemas || []).map((s) => {
    const conflict = (s.conflict || []).length > 0;
    return el('tr', { class: 'shard-schema', 'data-schema': s.name, 'data-cluster': conflict ? '' : (s.cluster || ''), 'data-state': s.state },
      el('td', null, s.name),
      el('td', conflict ? { class: 'error' } : null, conflict ? 'CONFLICT: ' + s.conflict.join(', ') : (s.cluster || '—')),
      el('td', null, el('span', { class: 'shard-state', 'data-state': s.state }, s.state)),
      el('td', { class: 'muted' }, s.source || ''));
  }));
  const refused = Object.entries(l.refused || {}).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`);
  setText($('#shard-refused'), refused.length ? 'refused: ' + refused.join(', ') : '');
  renderMove(sh.moves || {});
}

// renderMove draws the running move, else the last one: its steps with
// their results, the failovers it followed, and what it waits for.
function renderMove(m) {
  const box = $('#shard-move');
  const j = m.running || m.last;
  if (!j) {
    box.replaceChildren(el('p', { class: 'muted' }, 'No move yet.'));
    return;
  }
  const running = !!m.running;
  const head = `${running ? 'Running' : 'Last'}: ${j.kind} of ${j.schema} ${j.from} → ${j.to}`;
  const owner = m.owner ? ` (instance ${m.owner})` : '';
  const items = [];
  (j.steps || []).forEach((name, i) => {
    let r = null;
    for (const x of j.results || []) if (x.name === name) r = x; // the newest run of the step
    let state = 'pending';
    if (r && r.error) state = 'failed';
    else if (r && r.finished) state = 'done';
    else if (r) state = 'running';
    if (j.state === 'waiting' && i === j.step) state = 'waiting';
    const text = state === 'waiting' ? `waiting for the cutover: vigil ctl shard cutover ${j.schema}` : (r ? (r.error || r.detail || '') : '');
    items.push(el('li', { class: 'move-step', 'data-step': name, 'data-state': state },
      el('b', null, name), ' ', el('span', { class: 'phase', 'data-phase': state }, state), text ? ' — ' + text : ''));
  });
  const follows = (j.follows || []).map((f) => el('li', { class: 'move-follow' }, 'followed a failover: ' + f));
  box.replaceChildren(
    el('p', { class: 'move', 'data-schema': j.schema, 'data-state': j.state, 'data-kind': j.kind },
      el('b', null, head), owner, ' · ', el('span', { class: 'phase', 'data-phase': j.state }, j.state)),
    el('ol', { class: 'move-steps' }, ...items),
    ...(follows.length ? [el('ul', null, ...follows)] : []),
    ...((m.error && !running) ? [el('p', { class: 'error' }, m.error)] : []));
}

function groupBy(list, key) {
  const m = new Map();
  for (const x of list) {
    const k = x[key] || '';
    if (!m.has(k)) m.set(k, []);
    m.get(k).push(x);
  }
  return m;
}

function renderClusters(servers) {
  const root = $('#clusters');
  const byCluster = groupBy(servers, 'cluster');
  for (const sec of [...root.children]) {
    if (!byCluster.has(sec.dataset.cluster)) sec.remove();
  }
  for (const [name, list] of byCluster) {
    let sec = [...root.children].find((s) => s.dataset.cluster === name);
    if (!sec) {
      sec = buildCluster(name);
      root.append(sec);
    }
    updateCluster(sec, name, list);
  }
}

function buildCluster(name) {
  const select = el('select', { class: 'switchover-target', 'data-cluster': name, 'aria-label': 'switchover target' });
  const button = el('button', { type: 'button', class: 'switchover primary', 'data-cluster': name }, 'Switchover');
  button.addEventListener('click', () => switchover(name, select.value, button));
  const table = el('table', { class: 'servers' },
    el('thead', null, el('tr', null,
      el('th', null, 'server'), el('th', null, 'address'), el('th', null, 'role'), el('th', null, 'state'),
      el('th', { class: 'num' }, 'lag'), el('th', { class: 'num' }, 'pool in use / open'),
      el('th', { class: 'num' }, 'waits'), el('th', null, 'gtid'), el('th', null, 'reason'), el('th', null, ''))),
    el('tbody'));
  return el('section', { class: 'cluster', 'data-cluster': name },
    el('div', { class: 'cluster-head' },
      el('h2', null, name || '(cluster)'), el('span', { class: 'kind' }),
      el('span', { class: 'spacer' }),
      el('div', { class: 'ops' }, el('label', null, 'switch over to '), select, button)),
    svg('svg', { class: 'graph', role: 'img', 'aria-label': 'topology of ' + name }),
    table);
}

function updateCluster(sec, name, list) {
  const galera = list.some((s) => s.role === 'galera');
  sec.dataset.topology = galera ? 'galera' : 'replication';
  $('.kind', sec).textContent = galera ? 'Galera cluster' : 'primary → replicas';
  drawGraph($('svg.graph', sec), list, galera);
  updateTargets($('select.switchover-target', sec), list);
  updateServerRows($('table.servers tbody', sec), name, list);
}

// Targets are the servers that are not the writer; "" lets Vigil choose.
function updateTargets(select, list) {
  const names = list.filter((s) => !s.writer).map((s) => s.name);
  const want = ['', ...names];
  const have = [...select.options].map((o) => o.value);
  if (want.join('\n') === have.join('\n')) return;
  const keep = select.value;
  select.replaceChildren(...want.map((n) => el('option', { value: n }, n || '(best candidate)')));
  if (want.includes(keep)) select.value = keep;
}

// ---- topology graph

const NODE_W = 176, NODE_H = 84, GAP_X = 26, GAP_Y = 64, PAD = 16;

function drawGraph(g, list, galera) {
  let top, bottom;
  if (galera) {
    top = [];
    bottom = list;
  } else {
    top = list.filter((s) => s.writer || s.role === 'primary');
    bottom = list.filter((s) => !top.includes(s)); // no primary known: one row
  }
  const cols = Math.max(top.length, bottom.length, 1);
  const width = PAD * 2 + cols * NODE_W + (cols - 1) * GAP_X;
  const rows = (top.length ? 1 : 0) + (bottom.length ? 1 : 0);
  const groupPad = galera ? 22 : 0;
  const height = PAD * 2 + rows * NODE_H + (rows - 1) * GAP_Y + groupPad;
  const rowX = (n, i) => (width - (n * NODE_W + (n - 1) * GAP_X)) / 2 + i * (NODE_W + GAP_X);
  const kids = [svg('defs', null, svg('marker', {
    id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 8, markerHeight: 8, orient: 'auto-start-reverse',
  }, svg('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#7a8294' })))];
  const pos = new Map();
  const y0 = PAD + groupPad;
  top.forEach((s, i) => pos.set(s, { x: rowX(top.length, i), y: y0 }));
  const yb = y0 + (top.length ? NODE_H + GAP_Y : 0);
  bottom.forEach((s, i) => pos.set(s, { x: rowX(bottom.length, i), y: yb }));

  if (galera && bottom.length) {
    const x = rowX(bottom.length, 0) - 10;
    const w = bottom.length * NODE_W + (bottom.length - 1) * GAP_X + 20;
    kids.push(svg('rect', { class: 'group', x, y: yb - 24, width: w, height: NODE_H + 34, rx: 10 }));
    kids.push(svg('text', { class: 'group-label', x: x + 10, y: yb - 8 }, 'Galera members (' + bottom.length + ')'));
  }
  // Replication: arrows from the primary to each replica.
  const primary = top.find((s) => s.writer) || top[0];
  if (primary) {
    const p = pos.get(primary);
    for (const s of bottom) {
      if (s.role !== 'replica') continue;
      const q = pos.get(s);
      const x1 = p.x + NODE_W / 2, y1 = p.y + NODE_H, x2 = q.x + NODE_W / 2, y2 = q.y - 2;
      const my = (y1 + y2) / 2;
      const cls = s.state === 'ONLINE' ? 'edge' : 'edge down';
      kids.push(svg('path', { class: cls, d: `M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2}`, 'marker-end': 'url(#arrow)' }));
    }
  }
  for (const s of list) kids.push(drawNode(s, pos.get(s)));
  g.setAttribute('viewBox', `0 0 ${width} ${height}`);
  g.setAttribute('height', String(height));
  g.replaceChildren(...kids);
}

function drawNode(s, p) {
  const role = s.writer ? s.role + ' · writer' : s.role;
  const pool = s.pool || {};
  const asyncNote = s.semi_sync_async_since ? `\nsemi-sync fell back to async since ${s.semi_sync_async_since}` : '';
  const tip = `${s.name} ${s.address}\n${s.state}${s.reason ? ': ' + s.reason : ''}\ngtid ${s.gtid || '–'}${asyncNote}`;
  return svg('g', {
    class: 'node', transform: `translate(${p.x},${p.y})`,
    'data-server': s.name, 'data-cluster': s.cluster, 'data-state': s.state,
    'data-role': s.role, 'data-writer': s.writer ? 'true' : 'false',
    'data-semisync': s.semi_sync_async_since ? 'async' : '',
  },
  svg('title', null, tip),
  svg('rect', { class: 'box', width: NODE_W, height: NODE_H, rx: 8, fill: STATE_COLOR[s.state] || '#8a8f98' }),
  svg('text', { class: 'name', x: 10, y: 21 }, s.name),
  svg('text', { class: 'role', x: NODE_W - 10, y: 20, 'text-anchor': 'end' }, role),
  svg('text', { class: 'state', x: 10, y: 42 }, s.semi_sync_async_since ? s.state + ' · semi-sync ASYNC' : s.state),
  svg('text', { class: 'lag', x: 10, y: 61 }, 'lag ' + fmtLag(s.lag_seconds)),
  svg('text', { class: 'pool', x: 10, y: 77 }, `in use ${pool.in_use ?? 0} / open ${pool.open ?? 0}`),
  svg('text', { class: 'qps', x: NODE_W - 10, y: 77, 'text-anchor': 'end', 'data-qps': s.name }, fmtQps(serverQps(s))));
}

// Statements per second per server, from the cumulative "queries" counter.
const serverRates = new Map();

function serverQps(s) {
  const q = serverRates.get(s.cluster + '/' + s.name);
  return q == null ? null : q;
}

function trackServerRates(servers, time) {
  const now = Date.parse(time) || Date.now();
  for (const s of servers) {
    const key = s.cluster + '/' + s.name;
    const rate = qpsOf('server:' + key, s.queries || 0, now);
    serverRates.set(key, rate);
  }
}

function fmtQps(q) {
  return q == null ? '' : (q < 10 ? q.toFixed(1) : Math.round(q)) + ' qps';
}

// ---- server rows (kept across updates so that buttons stay clickable)

function updateServerRows(tbody, cluster, list) {
  const rows = new Map([...tbody.children].map((r) => [r.dataset.server, r]));
  const order = [];
  for (const s of list) {
    let r = rows.get(s.name);
    if (!r) r = buildServerRow(cluster, s.name);
    rows.delete(s.name);
    fillServerRow(r, s);
    order.push(r);
  }
  for (const r of rows.values()) r.remove();
  order.forEach((r, i) => {
    if (tbody.children[i] !== r) tbody.insertBefore(r, tbody.children[i] || null);
  });
}

function buildServerRow(cluster, name) {
  const drain = el('button', { type: 'button', class: 'drain', title: 'OFFLINE_SOFT: no new connections, sessions finish' }, 'Drain');
  const online = el('button', { type: 'button', class: 'online', title: 'clear the override: back to ONLINE' }, 'Online');
  drain.addEventListener('click', () => setState(cluster, name, 'OFFLINE_SOFT', drain));
  online.addEventListener('click', () => setState(cluster, name, 'ONLINE', online));
  return el('tr', { 'data-server': name },
    el('td', { class: 'name' }, name), el('td', { class: 'address mono' }), el('td', { class: 'role' }),
    el('td', null, el('span', { class: 'state' })), el('td', { class: 'lag num' }), el('td', { class: 'pool num' }),
    el('td', { class: 'waits num' }), el('td', { class: 'gtid mono' }), el('td', { class: 'reason' }),
    el('td', { class: 'actions' }, drain, ' ', online));
}

function setText(e, v) {
  if (e.textContent !== v) e.textContent = v;
}

function fillServerRow(r, s) {
  const pool = s.pool || {};
  r.dataset.state = s.state;
  r.dataset.writer = s.writer ? 'true' : 'false';
  setText($('.address', r), s.address || '');
  setText($('.role', r), s.writer ? s.role + ' (writer)' : s.role);
  const st = $('.state', r);
  st.dataset.state = s.state;
  st.dataset.semisync = s.semi_sync_async_since ? 'async' : '';
  setText(st, s.semi_sync_async_since ? s.state + ' · semi-sync ASYNC since ' + fmtTime(s.semi_sync_async_since) : s.state);
  setText($('.lag', r), fmtLag(s.lag_seconds));
  setText($('.pool', r), `${pool.in_use ?? 0} / ${pool.open ?? 0}`);
  setText($('.waits', r), String(pool.waits ?? 0));
  setText($('.gtid', r), s.gtid || '');
  setText($('.reason', r), s.reason || '');
  if (!r.dataset.busy) {
    $('button.drain', r).disabled = s.state === 'OFFLINE_SOFT' || s.state === 'OFFLINE_HARD';
    $('button.online', r).disabled = s.state === 'ONLINE';
  }
}

// ---- events

let eventsKey = '';

// Operation steps are many: they are shown only on request.
function isStep(e) {
  return e.kind === 'step' || e.kind.endsWith('_step');
}

function renderEvents(events) {
  const showSteps = $('#show-steps').checked;
  const lastEv = events[events.length - 1];
  const key = showSteps + '|' + events.length + '|' + (lastEv ? lastEv.time + lastEv.kind + lastEv.message : '');
  if (key === eventsKey) return;
  eventsKey = key;
  const shown = events.filter((e) => showSteps || !isStep(e));
  $('#no-events').hidden = shown.length > 0;
  const items = shown.reverse().map((e) => {
    const where = [e.cluster, e.server].filter(Boolean).join('/');
    const change = e.from || e.to ? el('span', { class: 'change' }, ` ${e.from || 'none'} → ${e.to || 'none'}`) : null;
    return el('li', { 'data-kind': e.kind },
      el('time', { datetime: e.time, title: new Date(e.time).toString() }, fmtTime(e.time)),
      el('span', { class: 'kind' }, e.kind),
      el('span', null, el('b', null, where), where ? ' ' : '', e.message, change));
  });
  $('#timeline').replaceChildren(...items);
}

function setupEvents() {
  $('#show-steps').addEventListener('change', () => {
    if (last) renderEvents(last.events || []);
  });
}

// ---- digests

// Counts seen per digest, to compute qps over the last few seconds.
const digestHistory = new Map();
const QPS_WINDOW_MS = 5000;

function qpsOf(key, count, nowMs) {
  let h = digestHistory.get(key);
  if (!h) digestHistory.set(key, (h = []));
  h.push([nowMs, count]);
  while (h.length > 2 && nowMs - h[1][0] >= QPS_WINDOW_MS) h.shift();
  const [t0, c0] = h[0];
  if (nowMs - t0 < 400 || count < c0) return null;
  return (count - c0) / ((nowMs - t0) / 1000);
}

function renderDigests(rows, err, time) {
  const errEl = $('#digests-error');
  errEl.hidden = !err;
  errEl.textContent = err ? 'Digests unavailable: ' + err : '';
  const now = Date.parse(time) || Date.now();
  const multi = new Set(rows.map((r) => r.cluster)).size > 1;
  const seen = new Set();
  const trs = rows.map((d) => {
    const key = (d.cluster || '') + '/' + d.digest;
    seen.add(key);
    const qps = qpsOf(key, d.count, now);
    const text = (multi && d.cluster ? '[' + d.cluster + '] ' : '') + (d.digest_text || d.digest);
    return el('tr', { 'data-digest': d.digest },
      el('td', { class: 'text mono', title: d.digest_text || '' }, text),
      el('td', { class: 'num' }, fmtCount(d.count)),
      el('td', { class: 'num' }, qps == null ? '–' : qps.toFixed(qps < 10 ? 1 : 0)),
      el('td', { class: 'num' }, fmtUs(d.avg_us)),
      el('td', { class: 'num' }, fmtUs(d.p99_us)),
      el('td', { class: 'num' }, fmtUs(d.total_us)),
      el('td', { class: 'num' }, fmtCount(d.errors)));
  });
  for (const k of digestHistory.keys()) if (!k.startsWith('server:') && !seen.has(k)) digestHistory.delete(k);
  $('#digests tbody').replaceChildren(...trs);
}

// ---- operations

function showMessage(kind, text) {
  const m = $('#message');
  m.dataset.kind = kind;
  m.textContent = text;
  m.hidden = false;
}

// api sends a request to the admin REST API, asking for the token when it
// is refused, and returns the decoded JSON body with the status.
async function api(method, path, body) {
  for (;;) {
    const res = await fetch(new URL(path, API), {
      method,
      headers: authHeaders({ 'Content-Type': 'application/json' }),
      body: body == null ? undefined : JSON.stringify(body),
    });
    if (res.status === 401) {
      await askToken(getToken() ? 'Those credentials were refused.' : '');
      continue;
    }
    let data = null;
    try { data = await res.json(); } catch (e) { /* not JSON */ }
    return { status: res.status, ok: res.ok, data: data || {} };
  }
}

async function switchover(cluster, to, button) {
  const cur = (last && last.servers || []).find((s) => s.cluster === cluster && s.writer);
  const from = cur ? cur.name : 'the current primary';
  const target = to || 'the best candidate';
  if (!window.confirm(`Switch over cluster ${cluster} from ${from} to ${target}?\n\nWrites pause while the roles change.`)) return;
  button.disabled = true;
  showMessage('busy', `Switchover of ${cluster} to ${target} running…`);
  try {
    const body = { cluster };
    if (to) body.to = to;
    const r = await api('POST', 'switchover', body);
    const d = r.data;
    if (r.ok && d.ok) {
      const took = d.elapsed_ms != null ? ` in ${Math.round(d.elapsed_ms)} ms` : '';
      const pause = d.write_pause_ms != null ? ` (writes held ${Math.round(d.write_pause_ms)} ms)` : '';
      showMessage('ok', `Switchover done: ${d.old_primary || from} → ${d.new_primary || target}${took}${pause}.`);
    } else {
      showMessage('error', `Switchover refused (HTTP ${r.status}): ${d.message || d.error || 'no reason given'}`);
    }
  } catch (e) {
    showMessage('error', 'Switchover failed: ' + e.message);
  } finally {
    button.disabled = false;
  }
}

async function setState(cluster, name, state, button) {
  const what = state === 'OFFLINE_SOFT'
    ? `Drain ${name} (OFFLINE_SOFT)?\n\nNew connections stop going to it; running sessions finish.`
    : `Put ${name} back ONLINE (clear the admin override)?`;
  if (!window.confirm(what)) return;
  const row = button.closest('tr');
  row.dataset.busy = '1';
  button.disabled = true;
  try {
    const r = await api('POST', `servers/${encodeURIComponent(name)}/state`, { cluster, state });
    if (r.ok) showMessage('ok', `${name}: ${state} requested.`);
    else showMessage('error', `${name}: ${state} refused (HTTP ${r.status}): ${r.data.error || r.data.message || ''}`);
  } catch (e) {
    showMessage('error', `${name}: ${e.message}`);
  } finally {
    delete row.dataset.busy;
    button.disabled = false;
  }
}

// ---- start

tokenFromFragment();
window.addEventListener('hashchange', () => {
  if (/(?:^#|&)token=/.test(location.hash)) {
    tokenFromFragment();
    tokenEntered();
    restartStream();
  }
});
setupLogin();
setupEvents();
streamLoop();
