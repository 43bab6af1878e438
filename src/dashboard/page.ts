/**
 * The dashboard's HTML shell. It holds no data (the script fetches it with the token),
 * so it is served without one; script and style are files of this repository.
 */
export function dashboardPage(options: { readonly tokenRequired: boolean }): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>circuitlog</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/dashboard/assets/dashboard.css">
</head>
<body data-token-required="${options.tokenRequired ? 'true' : 'false'}">
<header>
  <h1>circuitlog</h1>
  <input id="filter" type="search" placeholder="Filter by name" aria-label="Filter circuits by name" autocomplete="off">
  <span id="summary" aria-live="polite"></span>
  <span id="identity" title="Who this page is signed in as, and its scopes"></span>
  <span id="live" class="live" title="Live updates from /events/stream">connecting</span>
</header>
<form id="token-form" hidden>
  <label for="token">This server needs its token (CIRCUITLOG_TOKEN); it is kept in this tab only.</label>
  <input id="token" type="password" autocomplete="off" required>
  <button type="submit">Use token</button>
</form>
<p id="stale" role="alert" hidden></p>
<p id="message" role="status"></p>
<main>
  <section id="groups" aria-label="Circuits"></section>
  <aside>
    <h2>Recent transitions</h2>
    <ol id="timeline"></ol>
  </aside>
</main>
<details id="what-if">
  <summary>What if: backtest a policy on a circuit's recorded history</summary>
  <form id="what-if-form">
    <label>Circuit <input id="wi-circuit" required autocomplete="off" placeholder="click a circuit's name"></label>
    <label>Failure threshold <input id="wi-failure-threshold" type="number" step="1"></label>
    <label>Open time (s) <input id="wi-timeout" type="number" step="1"></label>
    <label>Window <select id="wi-window-type"><option value="">unchanged</option><option value="none">none</option><option value="count">count</option><option value="time">time</option></select></label>
    <label>Window size <input id="wi-window-size" type="number" step="1"></label>
    <label>Failure rate % <input id="wi-window-rate" type="number" step="any"></label>
    <label>From <input id="wi-from" type="datetime-local" step="1"></label>
    <label>To <input id="wi-to" type="datetime-local" step="1"></label>
    <button id="wi-run" type="submit">Run backtest</button>
  </form>
  <p id="wi-status" role="status"></p>
  <div id="wi-result" hidden>
    <p id="wi-summary"></p>
    <table id="wi-figures"><thead><tr><th></th><th>current</th><th>proposed</th></tr></thead><tbody></tbody></table>
    <img id="wi-picture" alt="The history's failure rate per minute under both policies' state bands" hidden>
  </div>
</details>
<script type="module" src="/dashboard/assets/dashboard.js"></script>
<script type="module" src="/dashboard/assets/what-if.js"></script>
</body>
</html>
`;
}
