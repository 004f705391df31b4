// The sluice console: polls api/state every second and api/dlq every few
// seconds, draws the rate chart as SVG, and sends the operator's actions
// with the admin token. No libraries, no build step.
'use strict';

const $ = (id) => document.getElementById(id);
const SVG = 'http://www.w3.org/2000/svg';
const LANE_COLORS = ['#0b5394', '#8a4f00', '#2e7d32', '#6a1b9a', '#00695c', '#5d4037'];
let token = sessionStorage.getItem('sluice-token') || '';
let state = null;
let actionsOn = false;
let deleteOn = false;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

async function api(path, opts) {
  opts = opts || {};
  const headers = {};
  if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
  if (opts.auth) headers['Authorization'] = 'Bearer ' + token;
  const res = await fetch('api/' + path, {
    method: opts.method || 'GET', headers, cache: 'no-store',
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  let data = null;
  try { data = await res.json(); } catch (e) { /* no body */ }
  if (!res.ok) throw new Error((data && data.error) || (res.status + ' ' + res.statusText));
  return data;
}

function say(text, error) {
  const m = $('message');
  m.textContent = text;
  m.className = error ? 'error' : '';
}

function rate(x) {
  if (x === undefined || x === null) return '–';
  return (Math.round(x * 10) / 10).toString() + '/s';
}

function ago(seconds) {
  if (!seconds) return '0s';
  if (seconds < 60) return seconds.toFixed(1) + 's';
  if (seconds < 3600) return Math.floor(seconds / 60) + 'm ' + Math.round(seconds % 60) + 's';
  return Math.floor(seconds / 3600) + 'h ' + Math.round((seconds % 3600) / 60) + 'm';
}

function laneColor(i) { return LANE_COLORS[i % LANE_COLORS.length]; }

// --- rendering ---------------------------------------------------------

function renderHeader(s) {
  $('queue').textContent = 'queue ' + s.queue + ' (' + s.backend + ')';
  const st = $('status');
  st.className = 'badge';
  if (!s.pacer) {
    st.textContent = 'pacer unreachable';
    st.classList.add('paused');
  } else if (s.pacer.paused) {
    st.textContent = 'paused';
    st.classList.add('paused');
  } else if (s.pacer.throttled_until) {
    st.textContent = 'throttled by the provider';
    st.classList.add('throttled');
  } else {
    st.textContent = 'running';
  }
  actionsOn = s.actions;
  deleteOn = s.delete_enabled;
  $('token-state').textContent = !s.actions ? 'read-only: no admin.token_file on this replica'
    : (token ? 'token set for this tab' : 'actions need the token');
  for (const id of ['pause', 'resume', 'requeue-selected', 'delete-selected', 'purge']) $(id).disabled = !s.actions;
  $('rate-form').querySelectorAll('button, input').forEach((b) => { b.disabled = !s.actions; });
  if (!s.delete_enabled) {
    $('delete-selected').disabled = true;
    $('purge').disabled = true;
  }
  $('delete-selected').title = $('purge').title = s.delete_enabled ? '' : 'not supported by this backend';
}

function renderPacer(s) {
  const dl = $('pacer');
  dl.replaceChildren();
  const add = (k, v) => dl.append(el('dt', {}, k), el('dd', {}, v));
  if (!s.pacer) {
    add('pacer', s.pacer_error || 'unreachable');
    return;
  }
  const p = s.pacer;
  add('cap', rate(p.rate_override || p.configured_rate) + (p.rate_override ? ' (override; configured ' + rate(p.configured_rate) + ')' : ' (pacer.rate)'));
  add('effective', rate(p.effective_rate) + (p.adaptation.episode ? ' — the provider is throttling' : ''));
  add('burst', String(p.effective_burst));
  add('paused', p.paused ? 'yes' : 'no');
  add('throttled until', p.throttled_until ? new Date(p.throttled_until).toLocaleTimeString() : '–');
  add('adaptive', p.adaptation.cuts + ' cuts, ' + p.adaptation.holds + ' holds so far');
}

function renderLanes(s) {
  const body = $('lanes').tBodies[0];
  body.replaceChildren();
  const h = s.history || [];
  const lastRates = h.length ? h[h.length - 1].lanes : {};
  if (s.queue_error) {
    body.append(el('tr', {}, el('td', { colspan: '6' }, 'queue unreachable: ' + s.queue_error)));
    return;
  }
  for (const l of s.lanes) {
    body.append(el('tr', {},
      el('th', { scope: 'row' }, l.name),
      el('td', { class: 'num' }, l.ready), el('td', { class: 'num' }, l.delayed), el('td', { class: 'num' }, l.in_flight),
      el('td', { class: 'num' }, l.ready ? ago(l.oldest_seconds) : '–'),
      el('td', { class: 'num' }, rate(lastRates[l.name] || 0))));
  }
}

function renderReplicas(s) {
  const body = $('replicas').tBodies[0];
  body.replaceChildren();
  if (s.replicas_error) {
    body.append(el('tr', {}, el('td', { colspan: '6' }, 'replicas unreadable: ' + s.replicas_error)));
    return;
  }
  for (const r of s.replicas) {
    const sent = Object.entries(r.sent || {}).map(([l, n]) => l + ' ' + n).join(', ') || '–';
    const link = r.admin ? el('a', { href: 'http://' + r.admin + '/console/' }, r.admin) : '–';
    body.append(el('tr', {}, el('th', { scope: 'row' }, r.id), el('td', {}, ago(r.seen_seconds_ago) + ' ago'),
      el('td', { class: 'num' }, r.sending), el('td', { class: 'num' }, r.held), el('td', {}, sent), el('td', {}, link)));
  }
}

// renderChart draws the achieved rate per lane and in total, the effective
// rate and the cap over the history's span.
function renderChart(s) {
  const chart = $('chart');
  const h = s.history || [];
  chart.querySelectorAll(':scope > :not(title):not(desc)').forEach((n) => n.remove());
  const W = 760, H = 260, L = 48, R = 12, T = 12, B = 28;
  const lanes = s.lanes.map((l) => l.name);
  const last = h.length ? h[h.length - 1] : null;
  chart.dataset.points = String(h.length);
  chart.dataset.achieved = last ? String(last.achieved) : '0';
  $('chart-desc').textContent = last
    ? 'Now: achieved ' + rate(last.achieved) + ', effective ' + rate(last.effective) + ', cap ' + rate(last.cap) + '; '
      + lanes.map((l) => l + ' ' + rate(last.lanes[l] || 0)).join(', ') + '.'
    : 'No data yet: the first point comes with the next heartbeat.';
  $('rate-now').textContent = last
    ? 'achieved ' + rate(last.achieved) + ' · effective ' + rate(last.effective) + ' · cap ' + rate(last.cap)
    : 'waiting for the replicas\' heartbeats…';
  const legend = $('legend');
  legend.replaceChildren();
  const key = (color, label, dash) => {
    const sw = el('span', { class: 'swatch', 'aria-hidden': 'true' });
    sw.style.background = dash ? 'repeating-linear-gradient(90deg,' + color + ' 0 4px,transparent 4px 7px)' : color;
    legend.append(el('span', {}, sw, label));
  };
  key('#1a1a1a', 'achieved, all lanes');
  lanes.forEach((l, i) => key(laneColor(i), 'lane ' + l));
  key('#555555', 'effective rate', true);
  key('#a61b1b', 'cap', true);
  if (h.length === 0) return;
  const t0 = Date.parse(h[0].at), t1 = Math.max(Date.parse(last.at), t0 + 60000);
  let ymax = 1;
  for (const p of h) ymax = Math.max(ymax, p.cap, p.effective, p.achieved);
  ymax *= 1.1;
  const x = (t) => L + (W - L - R) * (Date.parse(t) - t0) / (t1 - t0);
  const y = (v) => T + (H - T - B) * (1 - v / ymax);
  for (let i = 0; i <= 4; i++) {
    const v = ymax * i / 4;
    chart.append(svg('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: '#e0e0e0' }));
    const t = svg('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end' });
    t.textContent = Math.round(v);
    chart.append(t);
  }
  const span = svg('text', { x: W - R, y: H - 8, 'text-anchor': 'end' });
  span.textContent = 'last ' + Math.round((t1 - t0) / 1000) + ' s';
  chart.append(span);
  const line = (vals, attrs) => {
    const d = h.map((p, i) => (i ? 'L' : 'M') + x(p.at).toFixed(1) + ' ' + y(vals(p)).toFixed(1)).join(' ');
    chart.append(svg('path', Object.assign({ d, fill: 'none', 'stroke-width': 2 }, attrs)));
  };
  line((p) => p.cap, { stroke: '#a61b1b', 'stroke-dasharray': '6 4', class: 'cap' });
  line((p) => p.effective, { stroke: '#555555', 'stroke-dasharray': '2 3', class: 'effective' });
  lanes.forEach((l, i) => line((p) => p.lanes[l] || 0, { stroke: laneColor(i), class: 'lane' }));
  line((p) => p.achieved, { stroke: '#1a1a1a', 'stroke-width': 2.5, class: 'achieved' });
}

// --- dead letters ------------------------------------------------------

async function refreshDead() {
  let dead;
  try { dead = await api('dlq?limit=200'); } catch (e) { say('dead letters: ' + e.message, true); return; }
  const body = $('dead').tBodies[0];
  const checked = new Set([...body.querySelectorAll('input[type=checkbox]:checked')].map((c) => c.value));
  const open = new Set([...body.querySelectorAll('pre[data-id]')].map((p) => p.dataset.id));
  body.replaceChildren();
  $('dead-count').textContent = state ? '(' + state.dead_letters + ')' : '';
  if (dead.length === 0) {
    body.append(el('tr', {}, el('td', { colspan: '7' }, 'none')));
    return;
  }
  for (const d of dead) {
    const box = el('input', { type: 'checkbox', value: d.id, 'aria-label': 'select job ' + d.id });
    box.checked = checked.has(d.id);
    const show = el('button', { type: 'button', class: 'secondary', 'aria-label': 'show the payload of job ' + d.id }, 'Show (' + d.payload_bytes + ' B)');
    const cell = el('td', {}, show);
    show.addEventListener('click', () => showPayload(d.id, cell, show));
    const when = el('time', { datetime: d.at }, new Date(d.at).toLocaleString());
    const reason = d.reason + (d.expired ? '\n(expired: requeue leaves it here)' : '');
    body.append(el('tr', { 'data-id': d.id }, el('td', {}, box), el('th', { scope: 'row' }, d.id), el('td', {}, d.lane),
      el('td', { class: 'num' }, d.attempt), el('td', {}, when), el('td', { class: 'reason' }, reason), cell));
    if (open.has(d.id)) showPayload(d.id, cell, show);
  }
}

async function showPayload(id, cell, button) {
  if (!token) { say('Enter the admin token to see payloads.', true); $('token').focus(); return; }
  try {
    const d = await api('dlq/' + encodeURIComponent(id), { auth: true });
    let text = JSON.stringify(d.payload, null, 2);
    if (text === undefined) text = '';
    cell.querySelectorAll('pre').forEach((p) => p.remove());
    cell.append(el('pre', { 'data-id': id, tabindex: '0', 'aria-label': 'payload of job ' + id }, text));
    button.textContent = 'Shown';
    button.disabled = true;
  } catch (e) {
    say('payload of ' + id + ': ' + e.message, true);
  }
}

function selected() {
  return [...$('dead').tBodies[0].querySelectorAll('input[type=checkbox]:checked')].map((c) => c.value);
}

// --- actions -----------------------------------------------------------

async function act(path, body, done) {
  if (!token) { say('Enter the admin token first.', true); $('token').focus(); return; }
  try {
    const res = await api(path, { method: 'POST', auth: true, body: body || {} });
    say(done(res));
  } catch (e) {
    say(path + ': ' + e.message, true);
  }
  await refresh();
  await refreshDead();
}

function wire() {
  $('token').value = token;
  $('token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    token = $('token').value.trim();
    sessionStorage.setItem('sluice-token', token);
    say(token ? 'Token set for this tab.' : 'Token cleared.');
    refresh();
  });
  $('pause').addEventListener('click', () => act('pause', {}, () => 'Paused: no replica sends until resume.'));
  $('resume').addEventListener('click', () => act('resume', {}, () => 'Resumed.'));
  $('rate-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const r = Number($('rate').value);
    act('rate', { rate: r }, () => 'Rate override set: ' + rate(r) + ' for every replica.');
  });
  $('clear-rate').addEventListener('click', () => act('rate', { clear: true }, () => 'Override cleared: back to pacer.rate.'));
  $('requeue-selected').addEventListener('click', () => {
    const ids = selected();
    if (!ids.length) { say('Select dead letters first.', true); return; }
    act('dlq/requeue', { ids }, (r) => 'Requeued ' + r.requeued + (r.skipped_expired ? '; left ' + r.skipped_expired.length + ' expired' : '') + '.');
  });
  $('delete-selected').addEventListener('click', () => {
    const ids = selected();
    if (!ids.length) { say('Select dead letters first.', true); return; }
    if (!confirm('Delete ' + ids.length + ' dead letter(s) for good?')) return;
    act('dlq/delete', { ids }, (r) => 'Deleted ' + r.deleted + '.');
  });
  $('purge').addEventListener('click', () => {
    if (!confirm('Delete every dead letter for good?')) return;
    act('dlq/purge', {}, (r) => 'Purged ' + r.deleted + '.');
  });
}

async function refresh() {
  try {
    state = await api('state');
  } catch (e) {
    $('status').textContent = 'console unreachable';
    say('state: ' + e.message, true);
    return;
  }
  renderHeader(state);
  renderPacer(state);
  renderChart(state);
  renderLanes(state);
  renderReplicas(state);
  $('dead-count').textContent = '(' + state.dead_letters + ')';
}

wire();
refresh().then(refreshDead);
setInterval(refresh, 1000);
setInterval(refreshDead, 4000);
