// The Reservations view: every path reservation space, what is held in it
// and who waits, in their line's order. Record fields are text only.

import { h, table, card, dur, elapsed, state } from './app.js';

// A row's state now: a held or waiting reservation whose time has run out
// since the document came is expired (no write says so).
function stateNow(r) {
  return r.state !== 'expired' && r.ttl_left_ms - elapsed() <= 0 ? 'expired' : r.state;
}
const left = r => dur(Math.max(r.ttl_left_ms - elapsed(), 0));
const age = r => dur(r.age_ms + elapsed());

function bytes(n) {
  if (n < 1024) return n + ' B';
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KiB';
  return (n / 1024 / 1024).toFixed(2) + ' MiB';
}

const patterns = r => h('td', {}, r.patterns.map(p => h('span', { className: 'chip mono' }, p)));
const modeChip = r => h('span', { className: 'mode ' + (r.shared ? 'shared' : 'exclusive') }, r.shared ? 'shared' : 'exclusive');
const who = r => [h('td', {}, r.agent || '-'), h('td', { className: 'mono' }, r.task || '-'), h('td', {}, r.host), h('td', { className: 'num' }, r.pid)];
const meta = r => h('td', {}, Object.entries(r.meta || {}).map(([k, v]) => h('span', { className: 'chip' }, k + '=' + v)));

// spaceSection is one space: what is held (and what expired, until the
// next write drops it), then the line, first first, in one table so that
// the columns line up.
function spaceSection(sp) {
  const rows = sp.reservations.map(r => Object.assign({}, r, { now: stateNow(r) }));
  const held = rows.filter(r => r.now !== 'waiting');
  const line = rows.filter(r => r.now === 'waiting');
  const nHeld = held.filter(r => r.now === 'held').length;
  const oldest = line.length ? Math.max(...line.map(r => r.age_ms)) + elapsed() : 0;
  const head = ['patterns', 'mode', 'state', 'agent', 'task', 'host', 'pid', 'fence', 'for', 'left', 'meta'];
  const body = held.map(r => h('tr', { 'data-reservation': r.id, className: r.now === 'expired' ? 'quiet' : '' },
    patterns(r), h('td', {}, modeChip(r)), h('td', {}, h('span', { className: 'state ' + r.now }, r.now)), ...who(r),
    h('td', { className: 'num' }, r.fence || '-'), h('td', { className: 'num', title: 'since ' + (r.since || '?') }, age(r)),
    h('td', { className: 'num' }, r.now === 'expired' ? '-' : left(r)), meta(r)));
  if (line.length) {
    body.push(h('tr', { className: 'group' }, h('th', { colSpan: head.length }, 'Waiting, first first')));
    body.push(...line.map((r, i) => h('tr', { 'data-waiter': r.id },
      patterns(r), h('td', {}, modeChip(r)), h('td', {}, h('span', { className: 'state waiting' }, '#' + (i + 1) + ' waiting')), ...who(r),
      h('td', { className: 'num' }, '-'), h('td', { className: 'num', title: 'waiting since ' + (r.since || '?') }, age(r)),
      h('td', { className: 'num' }, left(r)), meta(r))));
  }
  return h('section', { className: 'panel', 'data-space': sp.space },
    h('h3', {}, sp.space, ' ', h('span', { className: 'muted' }, 'revision ' + sp.revision)),
    sp.undecodable ? h('p', { className: 'bad' }, 'Its record does not decode, so its paths are never free and nobody can reserve in it: ' + sp.undecodable + ' (baton doctor)') : null,
    h('div', { className: 'cards' },
      card(nHeld, 'held' + (sp.held_shared ? ' (' + sp.held_shared + ' shared)' : '')),
      card(line.length, 'waiting', line.length ? 'warn' : ''),
      card(line.length ? dur(oldest) : '-', 'the longest wait'),
      card(bytes(sp.size), 'record size')),
    table(head, body, { empty: sp.undecodable ? 'unknown' : 'nothing held' }));
}

function spacesTable(list) {
  return table(['space', 'held', 'shared', 'waiting', 'longest wait', 'expired', 'record'], list.map(sp => {
    const line = sp.reservations.filter(r => stateNow(r) === 'waiting');
    return h('tr', { 'data-space-row': sp.space },
      h('td', { className: 'mono' }, sp.space, sp.undecodable ? h('span', { className: 'state expiring' }, 'does not decode') : null),
      h('td', { className: 'num' }, sp.reservations.filter(r => stateNow(r) === 'held').length),
      h('td', { className: 'num' }, sp.held_shared), h('td', { className: 'num' + (line.length ? ' warn' : '') }, line.length),
      h('td', { className: 'num' }, line.length ? dur(Math.max(...line.map(r => r.age_ms)) + elapsed()) : '-'),
      h('td', { className: 'num' }, sp.reservations.filter(r => stateNow(r) === 'expired').length),
      h('td', { className: 'num' }, bytes(sp.size)));
  }));
}

export function viewReservations() {
  const list = [...state.spaces.values()].sort((a, b) => a.space < b.space ? -1 : 1);
  const el = h('div', {}, h('h2', {}, 'Reservations'));
  if (!list.length) {
    el.append(h('p', { className: 'muted' }, 'No paths are reserved. Reserve some with `baton reserve SPACE PATTERN…`; queue tasks added with --touches reserve theirs.'));
    return el;
  }
  el.append(h('div', { className: 'panel' }, spacesTable(list)), ...list.map(spaceSection));
  return el;
}
