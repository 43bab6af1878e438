// circuitlog dashboard, "what if" panel: backtests a few policy values on a circuit's recorded
// history (POST /circuits/{name}/backtest, docs/policy-lab.md) and shows the live and the
// proposed policy's figures side by side with the answer's picture. Plain browser JavaScript.

const TOKEN_KEY = 'circuitlog-token'; // dashboard.js keeps the token there, for this tab only

const $ = (id) => document.getElementById(id);

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { authorization: `Bearer ${token}` } : {};
}

const circuitPath = (name) => `/circuits/${encodeURIComponent(name)}`;
const number = (id) => ($(id).value.trim() === '' ? undefined : Number($(id).value));
const instant = (id) => ($(id).value === '' ? undefined : new Date($(id).value).toISOString());

/** The PATCH body the fields make: only what was filled in changes. */
function policyPatch() {
  const patch = {};
  const threshold = number('wi-failure-threshold');
  const timeout = number('wi-timeout');
  if (threshold !== undefined) patch.failure_threshold = threshold;
  if (timeout !== undefined) patch.timeout_seconds = timeout;
  const type = $('wi-window-type').value;
  if (type === 'none') patch.window = null;
  else {
    const window = {};
    if (type !== '') window.type = type;
    const size = number('wi-window-size');
    const rate = number('wi-window-rate');
    if (size !== undefined) window.size = size;
    if (rate !== undefined) window.failure_rate_threshold = rate;
    if (Object.keys(window).length > 0) patch.window = window;
  }
  return patch;
}

function duration(ms) {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  const s = Math.round(ms / 1_000);
  const h = Math.floor(s / 3_600);
  return `${h > 0 ? `${h} h ` : ''}${Math.floor((s % 3_600) / 60)} min ${s % 60} s`;
}

function median(values) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

const FIGURES = [
  ['openings', (f) => String(f.openings)],
  ['time open', (f) => duration(f.time_open_ms)],
  ['longest open', (f) => duration(f.longest_open_ms)],
  ['refused calls', (f) => String(f.refused_calls)],
  ['flaps', (f) => String(f.flaps)],
  ['median detection', (f) => (median(f.detection_ms) === null ? '–' : duration(median(f.detection_ms)))],
];

function cell(tag, text, attrs = {}) {
  const node = document.createElement(tag);
  node.textContent = text;
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

function showFigures(result) {
  const body = $('wi-figures').tBodies[0];
  body.replaceChildren(
    ...FIGURES.map(([label, text]) => {
      const tr = document.createElement('tr');
      tr.dataset.figure = label;
      tr.append(cell('th', label), cell('td', text(result.current)), cell('td', text(result.proposed)));
      return tr;
    }),
  );
  const f = result.fidelity;
  const start = result.start === 'created' ? 'from the circuit’s creation' : 'mid-history (closed assumed)';
  $('wi-summary').textContent =
    `${result.outcomes} outcomes replayed, ${new Date(result.from).toISOString()} to ${new Date(result.to).toISOString()}, ${start}. ` +
    `Fidelity ${f.matched}/${f.recorded} recorded transitions reproduced${f.manual_actions > 0 ? ` (${f.manual_actions} manual action${f.manual_actions === 1 ? '' : 's'})` : ''}.`;
  $('wi-result').hidden = false;
}

async function showPicture(name, id) {
  const res = await fetch(`${circuitPath(name)}/backtest/${id}.svg`, { headers: authHeaders() });
  if (!res.ok) throw new Error(`the picture: ${res.status}`);
  // A data: URL (the page's CSP allows images from this origin and data:, not blob:).
  $('wi-picture').src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(await res.text())}`;
  $('wi-picture').hidden = false;
}

async function run(event) {
  event.preventDefault();
  const name = $('wi-circuit').value.trim();
  const body = { policy: policyPatch() };
  const from = instant('wi-from');
  const to = instant('wi-to');
  if (from !== undefined) body.from = from;
  if (to !== undefined) body.to = to;
  $('wi-status').textContent = `Backtesting ${name}…`;
  $('wi-status').className = '';
  $('wi-run').disabled = true;
  try {
    const res = await fetch(`${circuitPath(name)}/backtest`, {
      method: 'POST',
      headers: { ...authHeaders(), 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const answer = await res.json();
    if (!res.ok) {
      const fields = (answer.errors ?? []).map((e) => `${e.field}: ${e.message}`).join('; ');
      throw new Error(`${answer.detail ?? res.status}${fields ? ` (${fields})` : ''}`);
    }
    showFigures(answer);
    await showPicture(name, answer.id);
    $('wi-status').textContent = `${name}: backtest ${answer.id}`;
  } catch (error) {
    $('wi-status').textContent = error.message;
    $('wi-status').className = 'error';
  } finally {
    $('wi-run').disabled = false;
  }
}

$('what-if-form').addEventListener('submit', (e) => void run(e));
// A click on a circuit's name in the lists picks it here.
document.addEventListener('click', (e) => {
  const name = e.target.closest?.('td.name');
  if (name) $('wi-circuit').value = name.textContent;
});
