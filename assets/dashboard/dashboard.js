// circuitlog dashboard: lists the circuits a page at a time (those refusing calls always
// first), searches them on the server, follows /events/stream, and offers the operator actions. Plain browser JavaScript, no build step and no CDN. The stream is read
// with fetch(), not EventSource, so the bearer token can go in a header (never in a URL).

const TOKEN_KEY = 'circuitlog-token';
const REFRESH_MS = 15_000; // full reload of figures that change without a transition (failure counts)
const LOAD_MS = 2_000; // upstreams' concurrency limits and requests in flight
const RECONNECT_MS = 1_000;
const TIMELINE_MAX = 100;
const PAGE = 500; // circuits per /dashboard/api/state answer for the open and half-open lists
const URGENT_MAX = 1_000; // open and half-open circuits listed each (past it the header says so)
const PAGE_SIZE = 100; // circuits per page of the list
const SEARCH_ANSWERS = 40; // search answers read for one page at most (each reads ≤ 5,000 circuits)
const SEARCH_DELAY_MS = 250; // typing pauses this long before the server is asked
const STATE_WORDS = { closed: 'closed', open: 'open', half_open: 'half-open' };

const $ = (id) => document.getElementById(id);
const view = {
  circuits: new Map(), // name -> circuit JSON (+ last_transition): what the page shows
  urgentFull: false, // more open or half-open circuits than URGENT_MAX
  after: 0, // the page: circuits after this id
  before: [], // the `after` of each earlier page, for Previous
  next: null, // the `after` of the next page, or null on the last
  complete: false, // the page holds every circuit (one page, no search): the header counts exactly
  upstreams: [],
  localDc: null,
  identity: null, // { id, scopes } the server says this page is signed in as (issue 30)
  timeline: [],
  lastEventId: 0,
  skewMs: 0, // server clock minus this browser's, for the countdowns
  filter: '',
  streaming: false,
  liveSince: 0,
  // A snapshot takes several requests; a circuit the stream, a refresh or an action changed
  // after the snapshot was asked for keeps the newer value (the snapshot may predate it).
  seq: 0, // counts the changes this page learned of, circuit by circuit
  changedAt: new Map(), // name -> view.seq of its last change here
  loadsAsked: 0, // snapshots asked for; an older one finishing after a newer is dropped
  loadsShown: 0,
};

/** One circuit as the page now knows it, newer than any snapshot asked for before this. */
function putCircuit(name, c) {
  view.seq += 1;
  view.changedAt.set(name, view.seq);
  view.circuits.set(name, c);
}

// ---- HTTP with the token -------------------------------------------------------------

class Unauthorized extends Error {}

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { authorization: `Bearer ${token}` } : {};
}

async function api(method, path, body) {
  const headers = { ...authHeaders() };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 401) {
    askForToken('The token was refused; enter it again.');
    throw new Unauthorized();
  }
  const text = await res.text();
  const json = text ? JSON.parse(text) : null;
  if (!res.ok) throw new Error(json?.detail ?? `${method} ${path}: ${res.status}`);
  return json;
}

function askForToken(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  $('token-form').hidden = false;
  setMessage(message ?? '');
  $('token').focus();
}

function setMessage(text, isError = false) {
  $('message').textContent = text;
  $('message').className = isError ? 'error' : '';
}

const circuitPath = (name) => `/circuits/${encodeURIComponent(name)}`;

// ---- data ------------------------------------------------------------------------------

/** Every page of the circuits in one state, up to `max`; true when there were more. */
async function loadUrgent(state, max, into) {
  let after = 0;
  let added = 0;
  while (after !== null && added < max) {
    const s = await api(
      'GET',
      `/dashboard/api/state?limit=${Math.min(PAGE, max - added)}&after=${after}&state=${state}`,
    );
    for (const c of s.circuits) into.set(c.name, c);
    added += s.circuits.length;
    after = s.next_after;
  }
  return after !== null;
}

/**
 * One page of the list: PAGE_SIZE circuits after `view.after` in creation order, or with a
 * filter the next PAGE_SIZE whose names contain it, searched by the server (each answer
 * reads a bounded slice of the table, so a search asks again until the page is full).
 */
async function loadListPage(into) {
  const q = view.filter ? `&q=${encodeURIComponent(view.filter)}` : '';
  let after = view.after;
  let s;
  for (let i = 0; i < SEARCH_ANSWERS && into.size < PAGE_SIZE && after !== null; i++) {
    s = await api('GET', `/dashboard/api/state?limit=${PAGE_SIZE - into.size}&after=${after}${q}`);
    for (const c of s.circuits) into.set(c.name, c);
    after = s.next_after;
  }
  return { s, next: after };
}

/**
 * What the page shows, each answer a short task for the server: the open and half-open
 * circuits (up to URGENT_MAX each, so a wall screen always shows what refuses calls), the
 * proxy's node circuits (in every answer), and one page of the rest; never the whole table.
 */
async function loadState() {
  const ticket = ++view.loadsAsked;
  const asOf = view.seq;
  const page = new Map();
  const { s, next } = await loadListPage(page);
  const circuits = new Map();
  const full = [await loadUrgent('open', URGENT_MAX, circuits), await loadUrgent('half_open', URGENT_MAX, circuits)];
  for (const c of s.nodes) circuits.set(c.name, c); // the proxy's node circuits, wherever they are
  for (const [name, c] of page) circuits.set(name, c);
  if (ticket < view.loadsShown) return; // a newer snapshot is on the page already
  for (const [name, seq] of view.changedAt) {
    const newer = view.circuits.get(name);
    if (seq <= asOf || newer === undefined) continue;
    if (circuits.has(name) || newer.state !== 'closed') circuits.set(name, newer);
  }
  for (const [name, seq] of view.changedAt) if (seq <= asOf) view.changedAt.delete(name);
  view.loadsShown = ticket;
  view.skewMs = Date.parse(s.now) - Date.now();
  view.upstreams = s.upstreams;
  view.localDc = s.local_dc;
  showIdentity(s.identity);
  for (const [name, c] of circuits) c.last_manual = manualOf(c) ?? view.circuits.get(name)?.last_manual ?? null;
  view.circuits = circuits;
  view.urgentFull = full.some(Boolean);
  view.next = next;
  view.pageSize = page.size;
  view.complete = view.after === 0 && next === null && !view.filter;
  if (view.timeline.length === 0) view.timeline = s.recent;
  if (!view.streaming) view.lastEventId = s.last_event_id;
  render();
  document.body.dataset.snapshots = String(ticket); // how many snapshots were asked before this one was shown
}

/** Load another page (Next, Previous, or the first again after a new filter). */
function goTo(after, before) {
  view.after = after;
  view.before = before;
  loadState().catch((error) => {
    if (!(error instanceof Unauthorized)) setMessage(error.message, true);
  });
}

/** The upstreams' limits and requests in flight change by the millisecond: read them (one circuit's page) every LOAD_MS. */
async function refreshLoads() {
  if (view.upstreams.length === 0) return;
  const s = await api('GET', '/dashboard/api/state?limit=1');
  const byName = new Map(s.upstreams.map((u) => [u.name, u.concurrency]));
  for (const u of view.upstreams) u.concurrency = byName.get(u.name) ?? null;
  render();
}

/** "limit 35 (adaptive) · 12 in flight", or "12 in flight" without a limit. */
function loadText(c) {
  if (!c) return '';
  const flight = `${c.in_flight} in flight`;
  return c.limit === null ? flight : `limit ${c.limit.value} (${c.limit.kind}) · ${flight}`;
}

const refreshing = new Map(); // name -> asked again while its request was out
/** Fetch one circuit again after an event: open_until and counts are not in the event. */
async function refreshCircuit(name) {
  if (refreshing.has(name)) return void refreshing.set(name, true); // fetched again after this one
  try {
    do {
      refreshing.set(name, false);
      const c = await api('GET', circuitPath(name));
      const known = view.circuits.get(name);
      putCircuit(name, {
        ...c,
        last_transition: known?.last_transition ?? null,
        last_manual: known?.last_manual ?? null,
      });
      render();
    } while (refreshing.get(name));
  } catch (error) {
    if (!(error instanceof Unauthorized)) setMessage(error.message, true);
  } finally {
    refreshing.delete(name);
  }
}

function onTransition(id, event) {
  view.lastEventId = id;
  const entry = { id, ...event };
  view.timeline = [entry, ...view.timeline].slice(0, TIMELINE_MAX);
  const known = view.circuits.get(event.circuit);
  // A shadow policy's event (issue 31): the circuit itself did not change; its row's shadow badge is fetched again.
  if (event.shadow) {
    render();
    if (known !== undefined) void refreshCircuit(event.circuit);
    return;
  }
  // A circuit not on the page joins it when it starts refusing or probing (it is urgent).
  if (known === undefined && event.to === 'closed') return render();
  const lastManual = entry.by === undefined ? (known?.last_manual ?? null) : entry;
  putCircuit(event.circuit, {
    ...(known ?? { name: event.circuit }),
    state: event.to,
    last_transition: entry,
    last_manual: lastManual,
  });
  render();
  void refreshCircuit(event.circuit);
}

// ---- the event stream, read with fetch -----------------------------------------------

async function followStream() {
  for (;;) {
    try {
      const headers = { ...authHeaders(), accept: 'text/event-stream' };
      if (view.lastEventId > 0) headers['last-event-id'] = String(view.lastEventId);
      const res = await fetch('/events/stream', { headers, cache: 'no-store' });
      if (res.status === 401) {
        askForToken('The token was refused; enter it again.');
        return;
      }
      if (!res.ok || !res.body) throw new Error(`event stream: ${res.status}`);
      view.streaming = true;
      setLive(true);
      void loadState().catch(() => {}); // anything missed while down
      await readEvents(res.body);
    } catch (error) {
      if (error instanceof TypeError || error instanceof Error) setLive(false);
    }
    view.streaming = false;
    setLive(false);
    await new Promise((r) => setTimeout(r, RECONNECT_MS));
  }
}

/** Parse text/event-stream; the format: https://html.spec.whatwg.org/multipage/server-sent-events.html */
async function readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.search(/\r?\n\r?\n/)) !== -1) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
      const fields = {};
      for (const line of block.split(/\r?\n/)) {
        if (line === '' || line.startsWith(':')) continue; // comments: heartbeats
        const colon = line.indexOf(':');
        const key = colon === -1 ? line : line.slice(0, colon);
        const val = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
        fields[key] = key === 'data' && fields.data !== undefined ? `${fields.data}\n${val}` : val;
      }
      if (fields.event === 'transition' && fields.data !== undefined)
        onTransition(Number(fields.id), JSON.parse(fields.data));
      // The server cannot resume from our id (unknown or expired): take a new snapshot.
      if (fields.event === 'reset' && fields.data !== undefined) {
        view.lastEventId = JSON.parse(fields.data).newest_id;
        view.timeline = [];
        void loadState().catch(() => {});
      }
    }
  }
}

/**
 * Live or not, for the whole page: with the stream down every row may be out of date, so
 * the page greys out and says since when, rather than leaving green rows that may lie.
 */
function setLive(on) {
  $('live').textContent = on ? 'live' : 'reconnecting';
  $('live').className = on ? 'live on' : 'live';
  if (on) {
    view.liveSince = Date.now();
    document.body.classList.remove('stale');
    $('stale').hidden = true;
    return;
  }
  if (document.body.classList.contains('stale')) return;
  document.body.classList.add('stale');
  const since = view.liveSince ? new Date(view.liveSince).toLocaleTimeString() : 'the start';
  $('stale').textContent =
    `Not live: the server does not answer. Everything below may be out of date (last live ${since}); reconnecting…`;
  $('stale').hidden = false;
}

// ---- rendering -------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') node.className = v;
    else if (k.startsWith('data-')) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

function ago(iso) {
  const s = Math.max(0, Math.round((Date.now() + view.skewMs - Date.parse(iso)) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  return `${Math.floor(s / 3600)}h ago`;
}

function countdownText(untilIso) {
  const ms = Date.parse(untilIso) - (Date.now() + view.skewMs);
  if (ms <= 0) return 'half-open due';
  return `probes in ${Math.ceil(ms / 1000)}s`;
}

/**
 * The probes column: an open circuit counts down to its first probe (its `data-until`, ticked
 * each second); a half-open one shows its probes in flight against its limit; a forced one
 * never probes (the force decides every call, whatever the state underneath).
 */
function probesCell(c) {
  if (c.forced_state) return el('td', { class: 'countdown', 'data-until': '', textContent: 'no probes (forced)' });
  if (c.state === 'half_open') {
    const text = `${c.probes_in_flight ?? 0} of ${c.half_open_max_calls} probes in flight`;
    return el('td', { class: 'countdown', 'data-until': '', textContent: text });
  }
  return el('td', { class: 'countdown', 'data-until': c.state === 'open' && c.open_until ? c.open_until : '' });
}

function failures(c) {
  const stats = c.window_stats;
  if (stats && stats.failure_rate !== null && stats.failure_rate !== undefined)
    return `${stats.failure_rate}% of ${stats.calls}`;
  return c.failure_threshold === undefined ? '' : `${c.failure_count}/${c.failure_threshold}`;
}

/** What a manual transition's reason says on a row ("forced open by oncall, 3m ago"). */
const MANUAL_WORDS = {
  forced_open: 'forced open',
  forced_closed: 'forced closed',
  force_cleared: 'force cleared',
  manual_reset: 'reset',
};

/** The circuit's last manual transition when it is its last transition (the server names who made it: `by`). */
function manualOf(c) {
  const t = c.last_transition;
  return t && t.by !== undefined && MANUAL_WORDS[t.reason] ? t : null;
}

/** Who forced or reset the circuit last, and when (ticked each second), or null. */
function manualNote(c) {
  const t = c.last_manual ?? manualOf(c);
  if (!t) return null;
  return el('span', {
    class: 'manual-by',
    'data-at': t.at,
    'data-what': `${MANUAL_WORDS[t.reason]} by ${t.by}`,
    title: `${t.reason} by ${t.by} at ${t.at}`,
  });
}

/** Reset and Force need the `operate` scope; without credentials (anonymous) every scope is held. */
function mayOperate() {
  return view.identity === null || view.identity.scopes.includes('operate');
}

/** The header's "signed in as": the identity and its scopes, from /dashboard/api/state. */
function showIdentity(identity) {
  view.identity = identity ?? null;
  const text = identity ? `${identity.id} (${identity.scopes.join(', ') || 'no scopes'})` : '';
  $('identity').textContent = text;
  $('identity').dataset.id = identity?.id ?? '';
}

function actionButton(label, action, name) {
  return el('button', { type: 'button', 'data-action': action, 'data-circuit': name, textContent: label });
}

/**
 * What a call gets now, the first thing a row shows: a force decides alone (forced open
 * refuses every call whatever `state` says); else open refuses, half-open admits probes.
 */
function verdict(c) {
  if (c.forced_state === 'open') return 'refused';
  if (c.forced_state === 'closed') return 'allowed';
  return c.state === 'open' ? 'refused' : c.state === 'half_open' ? 'probing' : 'allowed';
}
/**
 * A circuit forced closed (detect-only) admits every call; what would its rules do? Refuse
 * everyone while open underneath, or the callers it isolates. Null when they would refuse nothing.
 */
function wouldRefuse(c) {
  if (c.forced_state !== 'closed') return null;
  if (c.state === 'open') return 'the rules hold it open: every call would be refused';
  const isolated = Array.isArray(c.isolated_callers) ? c.isolated_callers.length : 0;
  if (isolated > 0)
    return `${isolated} isolated caller(s) would be refused: ${c.isolated_callers.map((i) => i.caller).join(', ')}`;
  return null;
}
/**
 * Issue 29: a closed circuit cooling down (its dependency asked for less load) or ramping up
 * (the shared slow start admits a share of the calls). Null when neither.
 */
function slowStartBadge(c) {
  if (c.cool_until)
    return el('span', {
      class: 'slow-start-badge cooling',
      textContent: 'cooling down',
      title: `The dependency asked for less load: every call is refused until ${c.cool_until}`,
    });
  if (typeof c.ramp_percent === 'number' && c.ramp_percent < 100)
    return el('span', {
      class: 'slow-start-badge ramping',
      textContent: `ramping ${Math.floor(c.ramp_percent)}%`,
      title: `Slow start: about ${Math.floor(c.ramp_percent)}% of calls admitted, all of them at ${c.ramp_until}`,
    });
  return null;
}
/** The circuit's shadow policy (issue 31): its state, and its counts on hover; null without one. */
function shadowBadge(c) {
  const s = c.shadow;
  if (!s) return null;
  const { outcomes, refused, openings } = s.counts;
  return el('span', {
    class: `shadow-badge ${s.state}`,
    textContent: `shadow ${STATE_WORDS[s.state] ?? s.state}`,
    title: `Shadow policy (acts on nothing): ${openings} openings, ${refused} of ${outcomes + refused} calls it would have refused, since ${s.since}`,
  });
}
const VERDICT_ORDER = { refused: 0, probing: 1, allowed: 2 };
/** Refused first, then probing, then allowed; by name within each. */
const byUrgency = (a, b) => VERDICT_ORDER[verdict(a)] - VERDICT_ORDER[verdict(b)] || a.name.localeCompare(b.name);

function row(c) {
  const t = c.last_transition;
  const forced = c.forced_state ?? null;
  const calls = verdict(c);
  const would = wouldRefuse(c);
  return el(
    'tr',
    { 'data-circuit': c.name, class: `state-${c.state} calls-${calls}${would ? ' would-refuse' : ''}` },
    el(
      'td',
      { class: 'verdict' },
      el('span', { class: `calls ${calls}`, textContent: calls, title: 'What a call gets now' }),
    ),
    el('td', { class: 'name', textContent: c.name }),
    el(
      'td',
      {},
      el('span', {
        class: `state ${c.state}${forced ? ' overridden' : ''}`,
        textContent: STATE_WORDS[c.state] ?? c.state,
        title: forced ? `breaker state; the force decides calls` : 'breaker state',
      }),
      slowStartBadge(c),
      shadowBadge(c),
    ),
    el('td', { class: 'failures', textContent: failures(c) }),
    probesCell(c),
    el(
      'td',
      { class: 'forced' },
      forced ? el('span', { class: `forced-badge ${forced}`, textContent: `forced ${forced}` }) : null,
      manualNote(c),
      would
        ? el('span', { class: 'would-refuse-badge', textContent: 'would refuse', title: `Detect-only: ${would}` })
        : null,
    ),
    el('td', {
      class: 'last',
      'data-at': t ? t.at : '',
      'data-what': t ? `${STATE_WORDS[t.from]} → ${STATE_WORDS[t.to]} (${t.reason})` : '–',
    }),
    mayOperate()
      ? el(
          'td',
          { class: 'actions' },
          actionButton('Reset', 'reset', c.name),
          actionButton('Force open', 'force-open', c.name),
          actionButton('Force closed', 'force-closed', c.name),
          actionButton('Clear', 'clear', c.name),
        )
      : el('td', { class: 'actions', title: 'Reset and Force need the operate scope' }),
  );
}

/** The columns of every table; their widths (dashboard.css, `col.<name>`) line up tables of the same width. */
const COLUMNS = ['calls', 'circuit', 'state', 'failures', 'probes', 'forced', 'last transition', ''];
const COLUMN_CLASSES = ['calls', 'circuit', 'state', 'failures', 'probes', 'forced', 'last', 'actions'];

function table(circuits) {
  return el(
    'table',
    {},
    el('colgroup', {}, ...COLUMN_CLASSES.map((name) => el('col', { class: `col-${name}` }))),
    el('thead', {}, el('tr', {}, ...COLUMNS.map((h) => el('th', { textContent: h })))),
    el('tbody', {}, ...circuits.map(row)),
  );
}

/** Does the circuit refuse calls now? A force decides alone (a node forced open is down). */
const refusing = (c) => verdict(c) !== 'allowed';

function render() {
  const match = (c) => c.name.toLowerCase().includes(view.filter);
  const all = [...view.circuits.values()].sort(byUrgency);
  const groups = [];
  const nodeCircuits = new Set();
  for (const u of view.upstreams) {
    const dcs = [...new Set(u.nodes.map((n) => n.dc))].sort(
      (a, b) => Number(b === view.localDc) - Number(a === view.localDc),
    );
    const parts = dcs.map((dc) => {
      const circuits = u.nodes
        .filter((n) => n.dc === dc)
        .map((n) => view.circuits.get(n.circuit))
        .filter((c) => c && match(c))
        .sort(byUrgency);
      for (const n of u.nodes) nodeCircuits.add(n.circuit);
      const open = circuits.filter(refusing).length;
      const title = `${dc}${dc === view.localDc ? ' (local)' : ''}: ${circuits.length - open} of ${circuits.length} nodes closed`;
      return circuits.length
        ? el(
            'div',
            { class: `dc ${open === circuits.length ? 'down' : open ? 'degraded' : 'up'}`, 'data-dc': dc },
            el('h3', { textContent: title }),
            table(circuits),
          )
        : null;
    });
    const load = el('span', { class: 'load', textContent: loadText(u.concurrency) });
    if (parts.some(Boolean))
      groups.push(
        el('section', { class: 'group', 'data-upstream': u.name }, el('h2', {}, `upstream ${u.name} `, load), ...parts),
      );
  }
  const others = all.filter((c) => !nodeCircuits.has(c.name) && match(c));
  if (others.length)
    groups.push(el('section', { class: 'group' }, el('h2', { textContent: 'circuits' }), table(others), pager()));
  if (groups.length === 0)
    groups.push(
      el('p', {
        class: 'empty',
        textContent: view.circuits.size || view.filter ? 'No circuit matches the filter.' : 'No circuits yet.',
      }),
      pager(),
    );
  $('groups').replaceChildren(...groups.filter(Boolean));

  const counts = { refused: 0, probing: 0, allowed: 0 };
  for (const c of all) counts[verdict(c)]++;
  // One page of many (or a search): every open and half-open circuit is known, the rest is not.
  const more = view.urgentFull ? '+' : '';
  const head = view.complete
    ? `${all.length} circuits: `
    : `page ${view.before.length + 1}${view.filter ? ` of the circuits matching "${view.filter}"` : ''}, ${view.pageSize} circuits; in all: `;
  $('summary').replaceChildren(
    head,
    el('span', { class: 'count refused', textContent: `${counts.refused}${more} refusing calls` }),
    ', ',
    el('span', { class: 'count probing', textContent: `${counts.probing}${more} probing` }),
    ...(view.complete ? [', ', el('span', { class: 'count allowed', textContent: `${counts.allowed} allowing` })] : []),
  );
  $('timeline').replaceChildren(
    ...view.timeline.map((t) =>
      el(
        'li',
        { class: `to-${t.to}` },
        el('time', { dateTime: t.at, textContent: new Date(t.at).toLocaleTimeString() }),
        ` ${t.circuit}${t.shadow ? ' (shadow)' : ''}: ${STATE_WORDS[t.from]} → ${STATE_WORDS[t.to]} (${t.reason})`,
      ),
    ),
  );
  tick();
}

/** Previous and Next under the list, when there is more than one page. */
function pager() {
  if (view.before.length === 0 && view.next === null) return null;
  const prev = el('button', {
    type: 'button',
    id: 'prev-page',
    textContent: '← Previous',
    disabled: view.before.length === 0,
  });
  const next = el('button', { type: 'button', id: 'next-page', textContent: 'Next →', disabled: view.next === null });
  prev.addEventListener('click', () => goTo(view.before.at(-1) ?? 0, view.before.slice(0, -1)));
  next.addEventListener('click', () => goTo(view.next, [...view.before, view.after]));
  return el(
    'nav',
    { class: 'pager', 'aria-label': 'Pages of circuits' },
    prev,
    ` page ${view.before.length + 1} `,
    next,
  );
}

/** Once a second: the open_until countdowns and how long ago each last transition was. */
function tick() {
  for (const cell of document.querySelectorAll('td.countdown')) {
    const until = cell.getAttribute('data-until');
    if (until) cell.textContent = countdownText(until);
  }
  for (const note of document.querySelectorAll('.manual-by')) {
    note.textContent = `${note.getAttribute('data-what')}, ${ago(note.getAttribute('data-at'))}`;
  }
  for (const cell of document.querySelectorAll('td.last')) {
    const at = cell.getAttribute('data-at');
    cell.textContent = at ? `${cell.getAttribute('data-what')}, ${ago(at)}` : cell.getAttribute('data-what');
  }
}

// ---- actions ---------------------------------------------------------------------------

const ACTIONS = {
  reset: (name) => api('POST', `${circuitPath(name)}/reset`),
  'force-open': (name) => api('PATCH', circuitPath(name), { forced_state: 'open' }),
  'force-closed': (name) => api('PATCH', circuitPath(name), { forced_state: 'closed' }),
  clear: (name) => api('PATCH', circuitPath(name), { forced_state: null }),
};

/** What each action does, asked before it runs (Clear only returns to the normal rules). */
const CONFIRM = {
  reset: (name) => `Reset ${name}? It closes now and admits every call.`,
  'force-open': (name) => `Force ${name} open? Every call is refused until the force is cleared.`,
  'force-closed': (name) =>
    `Force ${name} closed? Every call is admitted, failures or not, until the force is cleared.`,
};

async function onAction(event) {
  const button = event.target.closest('button[data-action]');
  if (!button) return;
  const { action, circuit } = button.dataset;
  if (CONFIRM[action] && !window.confirm(CONFIRM[action](circuit))) return;
  try {
    const c = await ACTIONS[action](circuit);
    const known = view.circuits.get(circuit);
    putCircuit(circuit, {
      ...c,
      last_transition: known?.last_transition ?? null,
      last_manual: known?.last_manual ?? null,
    });
    setMessage(`${circuit}: ${button.textContent.toLowerCase()} done`);
    render();
  } catch (error) {
    if (!(error instanceof Unauthorized)) setMessage(`${circuit}: ${error.message}`, true);
  }
}

// ---- start -----------------------------------------------------------------------------

let started = false;
async function start() {
  try {
    await loadState();
  } catch (error) {
    if (!(error instanceof Unauthorized)) setMessage(error.message, true);
    return;
  }
  setMessage('');
  if (started) return; // a token entered again after a 401: the stream loop and timer run already
  started = true;
  void followStream();
  setInterval(() => loadState().catch(() => {}), REFRESH_MS);
  setInterval(() => refreshLoads().catch(() => {}), LOAD_MS);
}

let searchTimer;
$('filter').addEventListener('input', (e) => {
  view.filter = e.target.value.trim().toLowerCase();
  render(); // what is on the page narrows at once; the server is asked once typing pauses
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => goTo(0, []), SEARCH_DELAY_MS);
});
$('groups').addEventListener('click', (e) => void onAction(e));
$('token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $('token').value);
  $('token').value = '';
  $('token-form').hidden = true;
  void start();
});
setInterval(tick, 1_000);

if (document.body.dataset.tokenRequired === 'true' && !sessionStorage.getItem(TOKEN_KEY)) askForToken();
else void start();
