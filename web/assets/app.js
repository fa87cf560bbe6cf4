// baton dashboard. Plain modules, no build step. Every record field is put
// in the page as text (textContent), never as markup.

import { viewReservations } from './reservations.js';

const api = (path, opts) => fetch('/api/v1/' + path, Object.assign({ credentials: 'same-origin', headers: { 'Accept': 'application/json' } }, opts))
  .then(async r => {
    const body = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(body.error || (r.status + ' ' + r.statusText));
    return body;
  });

const post = (path, body) => api(path, { method: 'POST', headers: { 'Content-Type': 'application/json', 'Accept': 'application/json' }, body: JSON.stringify(body || {}) });

// h builds an element; props set properties (className, onclick, ...) or
// attributes (data-*, aria-*, title); children are nodes or text.
export function h(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('data-') || k.startsWith('aria-') || k === 'title' || k === 'for') e.setAttribute(k, String(v));
    else e[k] = v;
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export const state = {
  config: { read_only: true },
  view: 'overview',
  overview: null,
  agents: new Map(),
  leases: new Map(),
  queues: new Map(),
  sems: new Map(), // semaphore name -> its view
  limiters: new Map(), // rate limiter name -> its view
  spaces: new Map(), // reservation space -> its view
  tasks: new Map(), // queue -> its task list, while shown
  sessions: null, // the page shown
  sessionQuery: { q: '', host: '', state: '', sort: 'slot', desc: false, offset: 0, limit: 100 },
  doctor: null,
  showQuiet: false,
  pending: new Map(), // agent key -> instance asked to lead
  received: Date.now(), // local time the server time below was received
  serverTime: null,
  connected: false,
  openMenu: null,
};

// Durations, for people.
export function dur(ms) {
  if (ms === null || ms === undefined || isNaN(ms)) return '-';
  const neg = ms < 0; ms = Math.abs(ms);
  let s;
  if (ms < 1000) s = Math.round(ms) + 'ms';
  else if (ms < 60e3) s = (ms / 1000).toFixed(ms < 10e3 ? 1 : 0) + 's';
  else if (ms < 3600e3) s = Math.floor(ms / 60e3) + 'm' + String(Math.floor(ms % 60e3 / 1000)).padStart(2, '0') + 's';
  else s = Math.floor(ms / 3600e3) + 'h' + String(Math.floor(ms % 3600e3 / 60e3)).padStart(2, '0') + 'm';
  return neg ? '-' + s : s;
}
// elapsed is the local time since the documents were received.
export const elapsed = () => Date.now() - state.received;
const serverNow = () => state.serverTime ? new Date(state.serverTime.getTime() + elapsed()) : null;
const hhmmss = t => t ? new Date(t).toISOString().slice(11, 19) : '-';

function toast(msg, err) {
  const t = h('div', { className: 'toast' + (err ? ' err' : '') }, msg);
  document.getElementById('toasts').append(t);
  setTimeout(() => t.remove(), err ? 8000 : 4000);
}

function stateChip(s) { return h('span', { className: 'state ' + s }, s); }

// ---------- loading ----------

function stamp(doc) {
  if (doc && doc.server_time) { state.serverTime = new Date(doc.server_time); state.received = Date.now(); }
}

async function loadAll() {
  const [cfg, ov, ag, ls] = await Promise.all([api('config'), api('overview'), api('agents'), api('leases')]);
  state.config = cfg;
  state.overview = ov; stamp(ov);
  state.agents = new Map(ag.agents.map(a => [a.key, a]));
  state.leases = new Map(ls.leases.map(l => [l.key, l]));
  const qs = await api('queues');
  const docs = await Promise.all(qs.queues.map(q => api('queues/' + encodeURIComponent(q.queue)).catch(() => null)));
  state.queues = new Map(docs.filter(Boolean).map(d => [d.queue, d]));
  const lim = await api('limits');
  state.sems = new Map(lim.semaphores.map(x => [x.name, x]));
  state.limiters = new Map(lim.limiters.map(x => [x.name, x]));
  const rv = await api('reservations');
  const spaces = await Promise.all(rv.spaces.map(s => api('reservations/' + encodeURIComponent(s.space)).catch(() => null)));
  state.spaces = new Map(spaces.filter(Boolean).map(d => [d.space, d]));
  await loadSessions();
  render();
}

let sessionsTimer = null;
async function loadSessions() {
  const q = state.sessionQuery;
  const p = new URLSearchParams({ q: q.q, host: q.host, state: q.state, sort: q.sort, desc: q.desc ? '1' : '0', offset: q.offset, limit: q.limit });
  state.sessions = await api('sessions?' + p);
  stamp(state.sessions);
}
// refetchSessions reads the page again soon (a session joined or left
// that may belong on it), at most twice a second.
function refetchSessions() {
  if (sessionsTimer) return;
  sessionsTimer = setTimeout(async () => {
    sessionsTimer = null;
    try { await loadSessions(); if (state.view === 'sessions') render(); } catch (e) { /* shown on the next try */ }
  }, 500);
}

// ---------- live updates ----------

function connect() {
  const es = new EventSource('/api/v1/events');
  const conn = document.getElementById('conn');
  es.addEventListener('hello', async ev => {
    state.connected = true;
    conn.textContent = 'live'; conn.className = 'conn up';
    try { await loadAll(); } catch (e) { toast('Could not read the cluster: ' + e.message, true); }
  });
  es.addEventListener('changes', ev => {
    const b = JSON.parse(ev.data);
    stamp(b);
    for (const c of b.changes) apply(c);
    scheduleRender();
  });
  es.onerror = () => {
    state.connected = false;
    conn.textContent = 'reconnecting'; conn.className = 'conn down';
  };
}

function apply(c) {
  switch (c.kind) {
    case 'agent':
      if (c.op === 'delete') state.agents.delete(c.key); else state.agents.set(c.key, c.doc);
      if (c.doc && c.doc.leader && state.pending.get(c.key) === c.doc.leader.holder) state.pending.delete(c.key);
      break;
    case 'lease':
      if (c.op === 'delete') state.leases.delete(c.key); else state.leases.set(c.key, c.doc);
      break;
    case 'queue':
      if (c.op === 'delete') { state.queues.delete(c.key); state.tasks.delete(c.key); } else state.queues.set(c.key, c.doc);
      if (state.tasks.has(c.key)) loadTasks(c.key);
      break;
    case 'semaphore':
      if (c.op === 'delete') state.sems.delete(c.key); else state.sems.set(c.key, c.doc);
      break;
    case 'limiter':
      if (c.op === 'delete') state.limiters.delete(c.key); else state.limiters.set(c.key, c.doc);
      break;
    case 'space':
      if (c.op === 'delete') state.spaces.delete(c.key); else state.spaces.set(c.key, c.doc);
      break;
    case 'overview':
      state.overview = c.doc;
      break;
    case 'session': {
      const page = state.sessions;
      if (!page) break;
      const i = page.rows.findIndex(r => r.slot === c.key);
      if (i >= 0 && c.op === 'delete') { page.rows.splice(i, 1); page.total = Math.max(0, page.total - 1); refetchSessions(); }
      else if (i >= 0) page.rows[i] = c.doc;
      else if (c.op === 'put') refetchSessions();
      break;
    }
  }
}

let renderQueued = false;
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => { renderQueued = false; render(); });
}

// ---------- views ----------

const views = { overview: viewOverview, agents: viewAgents, sessions: viewSessions, leases: viewLeases, queues: viewQueues, limits: viewLimits, reservations: viewReservations, doctor: viewDoctor };

// A render replaces the view's elements: one between a button's press and
// its release would swallow the click, so renders wait for the release.
let pressed = false, renderLater = false;
document.addEventListener('pointerdown', () => { pressed = true; }, true);
for (const ev of ['pointerup', 'pointercancel']) {
  document.addEventListener(ev, () => {
    pressed = false;
    if (renderLater) { renderLater = false; setTimeout(render, 0); }
  }, true);
}

function render() {
  if (pressed) { renderLater = true; return; }
  const main = document.getElementById('main');
  const active = document.activeElement;
  const keep = active && active.id && main.contains(active) ? { id: active.id, start: active.selectionStart, end: active.selectionEnd } : null;
  const node = (views[state.view] || viewOverview)();
  main.replaceChildren(node);
  if (keep) {
    const e = document.getElementById(keep.id);
    if (e) { e.focus(); if (keep.start !== undefined && e.setSelectionRange) try { e.setSelectionRange(keep.start, keep.end); } catch (_) { } }
  }
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.view === state.view);
  const now = serverNow();
  document.getElementById('clock').textContent = now ? 'server ' + now.toISOString().slice(11, 19) + ' UTC' : '';
}

export function card(n, label, cls) { return h('div', { className: 'card' }, h('div', { className: 'n ' + (cls || '') }, n), h('div', { className: 'l' }, label)); }

export function table(head, rows, opts) {
  opts = opts || {};
  return h('table', { className: opts.className || '' },
    h('thead', {}, h('tr', {}, head.map(c => typeof c === 'string' ? h('th', {}, c) : c))),
    h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colSpan: head.length, className: 'muted' }, opts.empty || 'none'))));
}

function viewOverview() {
  const o = state.overview;
  if (!o) return h('p', { className: 'muted' }, 'Loading…');
  const c = o.counts, hl = o.health;
  const skew = hl.connected ? dur(hl.skew_ms) : '-';
  const doc = o.doctor;
  return h('div', {},
    h('h2', {}, 'Overview'),
    h('div', { className: 'cards' },
      card(c.sessions.live, 'live sessions'),
      card(c.sessions.stale, 'stale sessions', c.sessions.stale ? 'warn' : ''),
      card(c.sessions.expiring, 'expiring sessions', c.sessions.expiring ? 'bad' : ''),
      card(c.leaders + ' / ' + c.agent_keys, 'agent keys led'),
      card(c.candidates, 'candidates'),
      card(c.leases.live + c.leases.stale + c.leases.expiring, 'leases'),
      card(o.queues.length, 'queues'),
      o.limits && o.limits.semaphores ? card(o.limits.units_held + ' / ' + o.limits.units_max, 'semaphore units held', o.limits.waiters ? 'warn' : '') : null,
      o.limits && o.limits.waiters ? card(o.limits.waiters, 'waiting for a permit', 'warn') : null,
      o.limits && o.limits.limiters ? card(o.limits.limiters, 'rate limiters') : null,
      o.reservations && o.reservations.spaces ? card(o.reservations.held, 'path reservations held in ' + o.reservations.spaces + (o.reservations.spaces === 1 ? ' space' : ' spaces')) : null,
      o.reservations && o.reservations.waiting ? card(o.reservations.waiting, 'waiting for paths, the longest ' + dur(o.reservations.oldest_wait_ms + elapsed()), 'warn') : null,
      o.reservations && o.reservations.undecodable ? card(o.reservations.undecodable, 'reservation spaces that do not decode', 'bad') : null,
      card(doc ? (doc.ok ? 'ok' : doc.findings) : '…', doc ? (doc.ok ? 'doctor: no problems' : 'doctor findings') : 'doctor', doc && !doc.ok ? 'bad' : 'ok')),
    h('div', { className: 'panel' },
      h('h3', {}, 'Servers'),
      h('p', { className: 'muted' }, (hl.connected ? 'Connected to ' + (hl.server_name || '?') + ' (' + hl.url + ', nats-server ' + hl.server_version + ')' : 'Not connected: ' + (hl.error || '')),
        ' · JetStream ', hl.jetstream ? 'on' : 'off', ' · this host\'s clock is ', skew, ' from the server\'s'),
      table(['server', 'reachable', 'leads', 'lag (ops)', ''],
        hl.servers.map(s => h('tr', {},
          h('td', { className: 'mono' }, s.name),
          h('td', { className: s.reachable ? 'ok' : 'bad' }, s.reachable ? 'yes' : 'no'),
          h('td', {}, s.leads.length ? s.leads.map(b => h('span', { className: 'chip' }, b)) : '-'),
          h('td', { className: 'num' }, s.lag),
          h('td', { className: 'muted' }, s.connected ? 'this dashboard\'s connection' : '')))),
      h('h3', { style: 'margin-top:14px' }, 'Buckets'),
      table(['bucket', 'leader', 'replicas', 'records', 'last revision'],
        hl.streams.map(s => h('tr', {},
          h('td', { className: 'mono' }, s.bucket), h('td', { className: 'mono' }, s.leader), h('td', { className: 'num' }, s.replicas),
          h('td', { className: 'num' }, s.messages), h('td', { className: 'num' }, s.last_seq))))),
    o.queues.length ? h('div', { className: 'panel' }, h('h3', {}, 'Queues'), queueSummaryTable(o.queues)) : null,
    doc && !doc.ok ? h('div', { className: 'panel' }, h('h3', {}, 'Doctor'),
      h('p', {}, Object.entries(doc.by_kind).map(([k, n]) => h('span', { className: 'chip' }, k + ': ' + n))),
      h('a', { href: '#/doctor' }, 'See the findings')) : null);
}

function queueSummaryTable(list) {
  return table(['queue', 'pending', 'active', 'done', 'failed', 'dead', 'cancelled'],
    list.map(q => h('tr', {},
      h('td', {}, h('a', { href: '#/queues' }, q.queue)), h('td', { className: 'num' }, q.pending),
      h('td', { className: 'num' }, q.active + ' / ' + (q.max_active || '∞')), h('td', { className: 'num' }, q.done),
      h('td', { className: 'num' }, q.failed), h('td', { className: 'num' }, q.dead), h('td', { className: 'num' }, q.cancelled))));
}

// ---------- agents ----------

async function makeLeader(key, instance) {
  state.pending.set(key, instance);
  state.openMenu = null;
  render();
  try {
    await post('agents/' + encodeURIComponent(key) + '/transfer', { to: instance });
    toast('Asked the leader of ' + key + ' to hand over to ' + instance);
  } catch (e) {
    state.pending.delete(key);
    toast('Make leader: ' + e.message, true);
    render();
  }
}

async function resign(key) {
  state.openMenu = null;
  try {
    const r = await post('agents/' + encodeURIComponent(key) + '/resign');
    state.pending.set(key, r.transfer_to);
    toast('Asked the leader of ' + key + ' to step down for ' + r.transfer_to);
  } catch (e) { toast('Resign: ' + e.message, true); }
  render();
}

function leaderBadge(a) {
  const l = a.leader;
  if (!l) return h('span', { className: 'badge none', 'data-testid': 'badge' }, h('span', { className: 'who' }, 'no leader'),
    a.leaderless_ms ? h('span', {}, 'for ' + dur(a.leaderless_ms + elapsed())) : null);
  if (l.undecodable) return h('span', { className: 'badge none', 'data-testid': 'badge', 'data-leader': '?', title: l.error },
    h('span', { className: 'who' }, 'held by ?'), h('span', {}, 'its record does not decode: run baton doctor'));
  const left = l.ttl_left_ms - elapsed();
  return h('span', { className: 'badge', 'data-testid': 'badge', 'data-leader': l.holder },
    h('span', {}, '★ leader'),
    h('span', { className: 'who mono' }, l.holder),
    h('span', {}, 'on ' + l.host + ' pid ' + l.pid),
    h('span', {}, 'fence ' + l.fence),
    h('span', { title: 'since ' + l.acquired_at }, 'term ' + dur(serverNow() - new Date(l.acquired_at))),
    h('span', {}, dur(Math.max(left, 0)) + ' left'));
}

function candidateMenu(a, c) {
  const id = a.key + '\u0000' + c.instance;
  const isLeader = a.leader && a.leader.holder === c.instance;
  const open = state.openMenu === id;
  const pending = state.pending.get(a.key);
  const btn = h('button', { onclick: ev => { ev.stopPropagation(); state.openMenu = open ? null : id; render(); }, 'aria-label': 'actions for ' + c.instance, 'data-testid': 'menu' }, pending === c.instance ? 'asked…' : 'Actions ▾');
  const list = open ? h('div', { className: 'menu-list' },
    h('button', { disabled: isLeader || !c.eligible || !a.leader || pending === c.instance, onclick: () => makeLeader(a.key, c.instance), 'data-testid': 'make-leader' }, 'Make leader'),
    h('button', { disabled: !isLeader, onclick: () => resign(a.key), className: 'danger', 'data-testid': 'resign' }, 'Resign')) : null;
  return h('div', { className: 'menu' }, btn, list);
}

function viewAgents() {
  const agents = [...state.agents.values()].sort((x, y) => x.key < y.key ? -1 : 1);
  const ro = state.config.read_only;
  const el = h('div', {},
    h('h2', {}, 'Agents'),
    h('div', { className: 'tools' },
      h('label', {}, h('input', { type: 'checkbox', checked: state.showQuiet, id: 'show-quiet', onchange: e => { state.showQuiet = e.target.checked; render(); } }),
        ' show candidates not seen for three renewal intervals')));
  if (!agents.length) el.append(h('p', { className: 'muted' }, 'No agent key has a leader or a candidate. Start one with `baton lead KEY -- CMD`.'));
  for (const a of agents) {
    const cands = a.candidates.filter(c => state.showQuiet || !c.quiet);
    const hidden = a.candidates.length - cands.length;
    const head = ['instance', 'host', 'pid', 'score', 'capabilities', 'eligible', 'last seen'];
    if (!ro) head.push('');
    el.append(h('section', { className: 'agent', 'data-agent': a.key },
      h('div', { className: 'agent-head' }, h('span', { className: 'agent-key' }, a.key), leaderBadge(a)),
      table(head, cands.map(c => h('tr', { className: c.quiet ? 'quiet' : '', 'data-instance': c.instance },
        h('td', { className: 'mono' }, c.leader ? '★ ' + c.instance : c.instance),
        h('td', {}, c.host), h('td', { className: 'num' }, c.pid), h('td', { className: 'num' }, c.score),
        h('td', {}, c.capabilities.length ? c.capabilities.map(x => h('span', { className: 'chip' }, x)) : '-'),
        h('td', {}, c.eligible ? 'yes' : 'no'),
        h('td', { title: c.last_seen }, hhmmss(c.last_seen) + ' (' + dur(c.last_seen_ms + elapsed()) + ' ago)'),
        ro ? null : h('td', {}, candidateMenu(a, c)))), { empty: 'no candidates' }),
      hidden ? h('p', { className: 'muted' }, hidden + ' quiet candidate(s) hidden') : null,
      a.changes.length ? h('ul', { className: 'changes' }, a.changes.slice().reverse().slice(0, 5).map(ch =>
        h('li', {}, hhmmss(ch.time) + ' ', ch.to ? (ch.from ? ch.from + ' → ' : '') + ch.to + (ch.fence ? ' (fence ' + ch.fence + ')' : '') : (ch.from || '?') + ' → no leader', ' · ' + ch.reason))) : null));
  }
  return el;
}

// ---------- sessions ----------

function viewSessions() {
  const page = state.sessions;
  const q = state.sessionQuery;
  const set = (k, v) => { q[k] = v; q.offset = 0; loadSessions().then(render).catch(e => toast(e.message, true)); };
  const cols = [['slot', 'slot'], ['task', 'task'], ['agent', 'agent'], ['host', 'host'], ['pid', 'pid'], ['fence', 'fence'], ['age', 'age'], ['left', 'left'], [null, 'state'], [null, 'meta']];
  const head = cols.map(([key, label]) => key ? h('th', {
    className: 'sortable' + (q.sort === key ? ' sorted' : ''),
    onclick: () => { if (q.sort === key) q.desc = !q.desc; else { q.sort = key; q.desc = false; } set('offset', 0); },
  }, label + (q.sort === key ? (q.desc ? ' ▼' : ' ▲') : '')) : h('th', {}, label));
  let filterTimer;
  const tools = h('div', { className: 'tools' },
    h('input', { type: 'search', id: 'session-filter', placeholder: 'filter: slot, task, agent, host, meta', value: q.q, size: 36,
      oninput: e => { clearTimeout(filterTimer); const v = e.target.value; filterTimer = setTimeout(() => set('q', v), 200); } }),
    h('select', { id: 'session-host', onchange: e => set('host', e.target.value) },
      h('option', { value: '' }, 'every host'), (page ? page.hosts : []).map(x => h('option', { value: x, selected: x === q.host }, x))),
    h('select', { id: 'session-state', onchange: e => set('state', e.target.value) },
      ['', 'live', 'stale', 'expiring'].map(x => h('option', { value: x, selected: x === q.state }, x || 'every state'))));
  if (!page) return h('div', {}, h('h2', {}, 'Sessions'), tools);
  const from = page.total ? page.offset + 1 : 0, to = page.offset + page.rows.length;
  return h('div', {},
    h('h2', {}, 'Sessions'), tools,
    h('div', { className: 'panel' },
      table(head, page.rows.map(r => h('tr', { 'data-slot': r.slot },
        h('td', { className: 'mono' }, r.slot), h('td', {}, r.task_id || (r.undecodable ? '?' : '')), h('td', {}, r.agent_id || ''),
        h('td', {}, r.host || ''), h('td', { className: 'num' }, r.pid || ''), h('td', { className: 'num' }, r.fence || ''),
        h('td', { className: 'num' }, dur(r.age_ms + elapsed())),
        h('td', { className: 'num' }, r.ttl_left_ms === null ? '∞' : dur(Math.max(r.ttl_left_ms - elapsed(), 0))),
        h('td', {}, stateChip(r.state)),
        h('td', {}, Object.entries(r.meta || {}).map(([k, v]) => h('span', { className: 'chip' }, k + '=' + v))))), { empty: 'no sessions' }),
      h('div', { className: 'tools', style: 'margin-top:10px' },
        h('span', { className: 'muted' }, from + '–' + to + ' of ' + page.total),
        h('button', { disabled: page.offset === 0, onclick: () => { q.offset = Math.max(0, q.offset - q.limit); loadSessions().then(render); } }, '← previous'),
        h('button', { disabled: to >= page.total, onclick: () => { q.offset += q.limit; loadSessions().then(render); } }, 'next →'))));
}

// ---------- leases ----------

function viewLeases() {
  const rows = [...state.leases.values()].sort((a, b) => a.key < b.key ? -1 : 1);
  return h('div', {}, h('h2', {}, 'Leases'), h('div', { className: 'panel' },
    table(['key', 'holder', 'host', 'pid', 'fence', 'age', 'left', 'state'], rows.map(r => h('tr', {},
      h('td', { className: 'mono' }, r.key), h('td', { className: 'mono' }, r.holder || '?'), h('td', {}, r.host || ''),
      h('td', { className: 'num' }, r.pid || ''), h('td', { className: 'num' }, r.fence || ''),
      h('td', { className: 'num' }, dur(r.age_ms + elapsed())), h('td', { className: 'num' }, r.ttl_left_ms === null ? '∞' : dur(Math.max(r.ttl_left_ms - elapsed(), 0))),
      h('td', {}, stateChip(r.state)))), { empty: 'no leases (leaders are under Agents)' })));
}

// ---------- queues ----------

async function queueAct(path, what) {
  try { await post(path); toast(what + ': done'); } catch (e) { toast(what + ': ' + e.message, true); }
}

// The task list of a queue is read on demand (a queue may hold many), then
// again on changes of the queue while it is shown: one read at a time, at
// most one every two seconds (each reads every task of the queue).
const taskLimit = 200;
const taskOrder = { active: 0, pending: 1, failed: 2, dead: 3, cancelled: 4, done: 5 };
const taskEvery = 2000;
async function loadTasks(q) {
  const cur = state.tasks.get(q) || {};
  if (cur.loading || cur.waiting) { cur.again = true; return; }
  const wait = (cur.at || 0) + taskEvery - Date.now();
  if (wait > 0) {
    cur.waiting = true; state.tasks.set(q, cur);
    setTimeout(() => { cur.waiting = false; if (state.tasks.get(q) === cur) loadTasks(q); }, wait);
    return;
  }
  state.tasks.set(q, Object.assign(cur, { loading: true, again: false, at: Date.now() }));
  try {
    const doc = await api('queues/' + encodeURIComponent(q) + '?tasks=1');
    if (!state.tasks.has(q)) return; // hidden meanwhile
    const all = (doc.tasks || []).slice().sort((a, b) => (taskOrder[a.state] - taskOrder[b.state]) || (a.seq - b.seq));
    cur.list = all.slice(0, taskLimit); cur.total = all.length; cur.error = null;
  } catch (e) { cur.error = e.message; }
  cur.loading = false;
  scheduleRender();
  if (cur.again && state.tasks.has(q)) loadTasks(q);
}

function toggleTasks(q) {
  if (state.tasks.has(q)) state.tasks.delete(q); else loadTasks(q);
  render();
}

// rateText is a rate limit as N/PERIOD, its period without a zero tail
// (1m, not Go's 1m0s).
function rateText(r) {
  return r.max + '/' + String(r.period).replace(/m0s$/, 'm').replace(/h0m$/, 'h');
}

// resultText is the start of a task's result (base64 in the JSON), for a
// table cell; empty when it has none.
function resultText(r) {
  if (!r || !r.output) return '';
  let s;
  try { s = new TextDecoder().decode(Uint8Array.from(atob(r.output), c => c.charCodeAt(0))); } catch (e) { return ''; }
  s = s.trim().replace(/\s+/g, ' ');
  return s.length > 60 ? s.slice(0, 60) + '…' : s;
}

function lastOf(t) {
  if (t.state === 'pending' && t.not_before && Date.parse(t.not_before) > Date.now()) return 'runs at ' + new Date(t.not_before).toLocaleString();
  const r = t.result;
  if (!r) return '-';
  const out = resultText(r);
  const how = r.reason === 'exit' ? 'exit ' + r.exit_code : r.reason + (r.error ? ': ' + r.error : '');
  return out ? how + ' → ' + out : how;
}

function taskTable(q, ro) {
  const qn = encodeURIComponent(q);
  const tl = state.tasks.get(q);
  if (!tl) return null;
  if (tl.error) return h('p', { className: 'muted' }, 'Could not read the tasks: ' + tl.error);
  if (!tl.list) return h('p', { className: 'muted' }, 'Reading the tasks…');
  const act = (t, verb, label) => h('button', { onclick: () => queueAct('queues/' + qn + '/tasks/' + encodeURIComponent(t.id) + '/' + verb, verb + ' ' + t.id) }, label);
  return h('div', {},
    tl.total > tl.list.length ? h('p', { className: 'muted' }, 'The first ' + tl.list.length + ' of ' + tl.total + ' tasks, running and waiting first; `baton queue status ' + q + ' --tasks` lists them all.') : null,
    table(['task', 'key', 'priority', 'state', 'attempts', 'last', ro ? '' : 'action'].filter(Boolean), tl.list.map(t => h('tr', { 'data-task': t.id },
      h('td', { className: 'mono' }, t.id), h('td', { className: 'mono' }, t.key), h('td', {}, t.priority),
      h('td', {}, stateChip(t.state)), h('td', { className: 'num' }, t.attempts), h('td', { className: 'mono' }, lastOf(t)),
      ro ? null : h('td', {},
        ['pending', 'active', 'failed'].includes(t.state) ? act(t, 'cancel', 'Cancel') : null,
        ['failed', 'dead', 'cancelled'].includes(t.state) ? act(t, 'retry', 'Retry') : null))), { empty: 'no tasks' }));
}

function viewQueues() {
  const list = [...state.queues.values()].sort((a, b) => a.queue < b.queue ? -1 : 1);
  const ro = state.config.read_only;
  const el = h('div', {}, h('h2', {}, 'Queues'));
  if (!list.length) el.append(h('p', { className: 'muted' }, 'No queues. Create one with `baton queue create NAME`.'));
  for (const q of list) {
    const a = q.active, p = q.pending;
    const pct = a.max ? Math.min(100, Math.round(100 * a.used / a.max)) : 0;
    const keys = Object.entries(p.by_key).map(([k, v]) => [k, v.high + v.normal + v.low, v]).sort((x, y) => y[1] - x[1]).slice(0, 20);
    const qn = encodeURIComponent(q.queue);
    const pausedKeys = q.paused_keys || [];
    const pauseBtn = ro ? null : q.paused
      ? h('button', { 'data-pause': q.queue, onclick: () => queueAct('queues/' + qn + '/resume', 'resume ' + q.queue) }, 'Resume')
      : h('button', { 'data-pause': q.queue, onclick: () => queueAct('queues/' + qn + '/pause', 'pause ' + q.queue) }, 'Pause');
    el.append(h('section', { className: 'panel', 'data-queue': q.queue },
      h('h3', {}, q.queue, ' ', q.paused ? h('span', { className: 'state paused', title: 'nothing new starts; running tasks go on' }, 'paused') : null, ' ',
        q.config.rate ? h('span', { className: 'chip', title: "at most this many starts in any window of the period, by the server's clock" }, 'rate ' + rateText(q.config.rate)) : null, ' ',
        q.config.key_rate ? h('span', { className: 'chip', 'data-key-rate': q.queue, title: "at most this many starts of each key in any window of the period, unless the key has a rate of its own" }, 'key rate ' + rateText(q.config.key_rate)) : null, ' ', pauseBtn),
      pausedKeys.length ? h('p', { 'data-paused-keys': q.queue }, 'paused keys: ', pausedKeys.map(k => h('span', { className: 'chip' }, k, ro ? null : h('button', { className: 'toggle', onclick: () => queueAct('queues/' + qn + '/keys/' + encodeURIComponent(k) + '/resume', 'resume ' + k) }, 'resume')))) : null,
      h('div', { className: 'cards' },
        card(p.total, 'pending'),
        card(p.delayed || 0, p.next_at ? 'waiting for their time; next ' + new Date(p.next_at).toLocaleTimeString() : 'waiting for their time'),
        card(a.used + ' / ' + (a.max || '∞'), 'active slots used'),
        card(q.counts.done, 'done'), card(q.counts.failed, 'failed', q.counts.failed ? 'warn' : ''),
        card(q.counts.dead, 'dead', q.counts.dead ? 'bad' : ''), card(q.counts.cancelled, 'cancelled'),
        card(p.oldest_age_ms !== undefined ? dur(p.oldest_age_ms + elapsed()) : '-', 'oldest pending')),
      a.max ? h('div', { className: 'bar', title: a.used + ' of ' + a.max }, h('span', { style: 'width:' + pct + '%' })) : null,
      h('p', {}, 'pending by priority: ', ['high', 'normal', 'low'].map(pr => h('span', { className: 'chip' }, pr + ' ' + (p.by_priority[pr] || 0)))),
      keys.length ? table(['key', 'pending', 'high', 'normal', 'low', 'active', ro ? '' : 'action'].filter(Boolean), keys.map(([k, n, v]) => h('tr', {},
        h('td', { className: 'mono' }, k, pausedKeys.includes(k) ? h('span', { className: 'state paused' }, 'paused') : null,
          ...(q.key_settings || []).filter(s => s.key === k && (s.weight > 1 || s.per_key !== q.config.per_key || s.rate)).map(s => h('span', { className: 'chip', 'data-key-settings': k }, 'per_key ' + s.per_key + ', weight ' + s.weight + (s.rate ? ', rate ' + rateText(s.rate) : '')))),
        h('td', { className: 'num' }, n), h('td', { className: 'num' }, v.high),
        h('td', { className: 'num' }, v.normal), h('td', { className: 'num' }, v.low), h('td', { className: 'num' }, a.by_key[k] || 0),
        ro ? null : h('td', {}, pausedKeys.includes(k)
          ? h('button', { onclick: () => queueAct('queues/' + qn + '/keys/' + encodeURIComponent(k) + '/resume', 'resume ' + k) }, 'Resume')
          : h('button', { onclick: () => queueAct('queues/' + qn + '/keys/' + encodeURIComponent(k) + '/pause', 'pause ' + k) }, 'Pause'))))) : null,
      (q.schedules || []).length ? h('div', {}, h('h3', { style: 'margin-top:12px' }, 'Schedules'),
        table(['schedule', 'when', 'key', 'catch-up', 'last tick', 'next tick', ro ? '' : 'action'].filter(Boolean), q.schedules.map(sc => h('tr', { 'data-schedule': sc.name },
          h('td', { className: 'mono' }, sc.name), h('td', {}, sc.every ? 'every ' + sc.every : sc.cron + ' (' + (sc.timezone || 'UTC') + ')'),
          h('td', { className: 'mono' }, sc.key), h('td', {}, sc.catch_up),
          h('td', {}, sc.last_tick ? new Date(sc.last_tick).toLocaleString() : '-'),
          h('td', {}, sc.paused ? h('span', { className: 'state paused' }, 'paused') : sc.next_tick ? new Date(sc.next_tick).toLocaleString() : '-'),
          ro ? null : h('td', {}, h('button', { onclick: () => queueAct('queues/' + qn + '/schedules/' + encodeURIComponent(sc.name) + '/' + (sc.paused ? 'resume' : 'pause'), (sc.paused ? 'resume ' : 'pause ') + sc.name) }, sc.paused ? 'Resume' : 'Pause')))))) : null,
      h('h3', { style: 'margin-top:12px' }, 'Key locks'),
      table(['key', 'lane', 'task', 'host', 'pid', 'fence', 'left', ro ? '' : 'action'].filter(Boolean), q.locks.map(l => h('tr', {},
        h('td', { className: 'mono' }, l.key), h('td', { className: 'num' }, l.lane), h('td', { className: 'mono' }, l.task || '-'),
        h('td', {}, l.host), h('td', { className: 'num' }, l.pid), h('td', { className: 'num' }, l.fence),
        h('td', { className: 'num' }, dur(Math.max(l.ttl_left_ms - elapsed(), 0))),
        ro ? null : h('td', {}, h('button', { onclick: () => queueAct('queues/' + qn + '/keys/' + encodeURIComponent(l.key) + '/release', 'release ' + l.key) }, 'Release')))), { empty: 'no key locks held' }),
      h('h3', { style: 'margin-top:12px' }, 'Tasks ',
        h('button', { className: 'toggle', 'data-tasks-toggle': q.queue, onclick: () => toggleTasks(q.queue) }, state.tasks.has(q.queue) ? 'Hide' : 'Show')),
      taskTable(q.queue, ro)));
  }
  return el;
}

// ---------- limits ----------

// A permit's colour: the same for its units wherever they are drawn.
function permitColour(id) {
  let x = 0;
  for (const ch of id) x = (x * 31 + ch.charCodeAt(0)) >>> 0;
  return 'hsl(' + (x % 360) + ', 55%, 45%)';
}
const since = t => t ? dur(serverNow() - new Date(t)) : '-';

// semBody is one semaphore, or one host's share of a per-host one.
function semBody(sm) {
  const byUnit = new Map();
  for (const p of sm.holders) for (const u of p.units) byUnit.set(u, p);
  const units = [];
  for (let i = 0; i < sm.max; i++) {
    const p = byUnit.get(i);
    units.push(p ? h('span', { className: 'unit held', style: 'background:' + permitColour(p.permit), title: 'unit ' + i + ': ' + p.host + ' pid ' + p.pid + ' (permit ' + p.permit + ')' }, i)
      : h('span', { className: 'unit', title: 'unit ' + i + ': free' }, i));
  }
  const pct = sm.max ? Math.min(100, Math.round(100 * sm.held / sm.max)) : 0;
  return [
    h('div', { className: 'cards' },
      card(sm.held + ' / ' + sm.max, 'units held', sm.held >= sm.max ? 'warn' : ''),
      card(sm.holders.length, 'permits'),
      card(sm.waiters.length, 'waiting', sm.waiters.length ? 'warn' : ''),
      card(sm.waiters.length ? since(sm.waiters[0].since) : '-', 'first waiter has waited')),
    h('div', { className: 'bar' + (sm.held >= sm.max ? ' full' : ''), title: sm.held + ' of ' + sm.max }, h('span', { style: 'width:' + pct + '%' })),
    h('h4', {}, 'Units'), h('div', { className: 'units', 'data-units': sm.name + (sm.host ? '@' + sm.host : '') }, units),
    h('h4', {}, 'Holders'),
    table(['index', 'weight', 'units', 'host', 'pid', 'held for', 'renewed', 'permit', 'meta'], sm.holders.map(p => h('tr', { 'data-permit': p.permit },
      h('td', { className: 'num' }, h('span', { className: 'chip', style: 'background:' + permitColour(p.permit) + ';color:#fff' }, p.index)),
      h('td', { className: 'num' }, p.weight), h('td', { className: 'mono' }, p.units.join(',')),
      h('td', {}, p.host), h('td', { className: 'num' }, p.pid),
      h('td', { className: 'num', title: p.acquired_at }, since(p.acquired_at)),
      h('td', { className: 'num', title: p.renewed_at }, since(p.renewed_at) + ' ago'),
      h('td', { className: 'mono' }, p.undecodable ? '? (' + p.undecodable + ')' : p.permit),
      h('td', {}, Object.entries(p.meta || {}).map(([k, v]) => h('span', { className: 'chip' }, k + '=' + v))))), { empty: 'nobody holds it' }),
    h('h4', {}, 'Waiting, first first'),
    table(['#', 'weight', 'host', 'pid', 'waiting for', 'ticket'], sm.waiters.map((w, i) => h('tr', { 'data-waiter': w.id },
      h('td', { className: 'num' }, i + 1), h('td', { className: 'num' }, w.weight), h('td', {}, w.host), h('td', { className: 'num' }, w.pid),
      h('td', { className: 'num', title: w.since }, since(w.since)), h('td', { className: 'mono' }, w.id))), { empty: 'nobody waits' })];
}

function semSection(sm) {
  const hosts = sm.hosts || [];
  return h('section', { className: 'panel', 'data-sem': sm.name },
    h('h3', {}, sm.name, ' ', h('span', { className: 'muted' }, sm.per_host ? 'semaphore of ' + sm.max + ' on each host' : 'semaphore of ' + sm.max)),
    sm.error ? h('p', { className: 'bad' }, 'Could not read it: ' + sm.error) : null,
    sm.per_host ? (hosts.length ? hosts.map(st => h('div', { className: 'host-share', 'data-host': st.host }, h('h4', {}, 'on ' + st.host), semBody(st)))
      : h('p', { className: 'muted' }, 'No host holds or waits for it.')) : semBody(sm));
}

function limiterSection(l) {
  return h('section', { className: 'panel', 'data-limiter': l.name },
    h('h3', {}, l.name, ' ', h('span', { className: 'muted' }, 'rate limiter')),
    l.undecodable ? h('p', { className: 'bad' }, 'Its record does not decode, so every take is refused: ' + l.undecodable + ' (baton doctor)') : null,
    h('div', { className: 'cards' },
      card(l.admitted, 'admitted since the dashboard started' + (l.admitted_cost !== l.admitted ? ' (cost ' + l.admitted_cost + ')' : '')),
      card(l.refused, 'refused' + (l.refused_cost !== l.refused ? ' (cost ' + l.refused_cost + ')' : ''), l.refused ? 'warn' : ''),
      card(l.last_refused_at ? since(l.last_refused_at) + ' ago' : '-', 'last refusal'),
      card(l.last_take_at ? since(l.last_take_at) + ' ago' : '-', 'last admitted')),
    table(['limit', 'counts', 'used in the window ending now', '', 'left'], l.limits.map(u => {
      const cap = u.max + (u.burst || 0);
      const pct = cap ? Math.min(100, Math.round(100 * u.used / cap)) : 0;
      return h('tr', { 'data-limit': u.limit },
        h('td', { className: 'mono' }, u.limit), h('td', {}, u.per === 'take' ? 'takes' : 'cost'),
        h('td', { className: 'num' }, u.used + ' / ' + cap),
        h('td', { style: 'width:30%' }, h('div', { className: 'bar' + (u.left === 0 ? ' full' : ''), title: u.used + ' of ' + cap }, h('span', { style: 'width:' + pct + '%' }))),
        h('td', { className: 'num' }, u.left));
    })));
}

function viewLimits() {
  const sems = [...state.sems.values()].sort((a, b) => a.name < b.name ? -1 : 1);
  const lims = [...state.limiters.values()].sort((a, b) => a.name < b.name ? -1 : 1);
  return h('div', {}, h('h2', {}, 'Limits'),
    h('h3', {}, 'Semaphores'),
    sems.length ? sems.map(semSection) : h('p', { className: 'muted' }, 'No semaphores. Create one with `baton sem create NAME --max N`.'),
    h('h3', { style: 'margin-top:18px' }, 'Rate limiters'),
    lims.length ? lims.map(limiterSection) : h('p', { className: 'muted' }, 'No rate limiters. Create one with `baton rate create NAME --limit N/PERIOD`.'));
}

// ---------- doctor ----------

async function runDoctor(fix) {
  try {
    state.doctor = fix ? await post('doctor/fix') : await api('doctor');
    if (fix) toast('Fixed what could be fixed safely');
  } catch (e) { toast('Doctor: ' + e.message, true); }
  render();
}

function viewDoctor() {
  const r = state.doctor;
  if (!r) { runDoctor(false); return h('div', {}, h('h2', {}, 'Doctor'), h('p', { className: 'muted' }, 'Checking…')); }
  const ro = state.config.read_only;
  return h('div', {}, h('h2', {}, 'Doctor'),
    h('div', { className: 'tools' },
      h('button', { onclick: () => runDoctor(false) }, 'Check again'),
      ro ? null : h('button', { className: 'primary', disabled: !r.findings.some(f => !f.fixed), onclick: () => runDoctor(true) }, 'Fix what is safe')),
    h('div', { className: 'panel' }, r.ok && !r.findings.length ? h('p', { className: 'ok' }, 'No problems found.') :
      table(['kind', 'key', 'detail', 'action', ''], r.findings.map(f => h('tr', {},
        h('td', { className: 'mono' }, f.kind), h('td', { className: 'mono' }, f.key), h('td', {}, f.detail), h('td', {}, f.action),
        h('td', { className: f.fixed ? 'ok' : (f.fix_error ? 'bad' : '') }, f.fixed ? 'fixed' : (f.fix_error || '')))))));
}

// ---------- start ----------

function route() {
  const v = (location.hash.replace(/^#\//, '') || 'overview').split('/')[0];
  state.view = views[v] ? v : 'overview';
  if (state.view === 'doctor') state.doctor = null;
  render();
}

window.addEventListener('hashchange', route);
document.addEventListener('click', () => { if (state.openMenu) { state.openMenu = null; render(); } });
setInterval(() => { if (!state.openMenu) render(); }, 1000);
route();
connect();
