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
<script type="module" src="/dashboard/assets/dashboard.js"></script>
</body>
</html>
`;
}
