// Goodput against offered load, for bench/overload.mjs: a small SVG and a text plot.

const W = 560;
const H = 320;
const PAD = { l: 56, r: 16, t: 28, b: 44 };
const COLORS = ['#1f77b4', '#d62728', '#2ca02c'];

/** @param {{ label: string, points: { load: number, goodput: number }[] }[]} curves goodput as a share of capacity */
export function goodputSvg(curves, { C, latencyMs }) {
  const maxLoad = Math.max(3, ...curves.flatMap((c) => c.points.map((p) => p.load)));
  const x = (load) => PAD.l + (load / maxLoad) * (W - PAD.l - PAD.r);
  const y = (g) => H - PAD.b - (Math.min(1.1, Math.max(0, g)) / 1.1) * (H - PAD.t - PAD.b);
  const parts = [
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${W / 2}" y="18" text-anchor="middle" font-size="13">Goodput vs offered load (C = ${C} at ${latencyMs} ms)</text>`,
  ];
  for (const g of [0, 0.25, 0.5, 0.75, 0.9, 1]) {
    parts.push(
      `<line x1="${PAD.l}" x2="${W - PAD.r}" y1="${y(g)}" y2="${y(g)}" stroke="${g === 0.9 ? '#999' : '#eee'}"${g === 0.9 ? ' stroke-dasharray="4 3"' : ''}/>`,
    );
    parts.push(
      `<text x="${PAD.l - 6}" y="${y(g) + 4}" text-anchor="end" font-size="11">${Math.round(g * 100)}%</text>`,
    );
  }
  for (let l = 0; l <= maxLoad; l += 0.5)
    parts.push(`<text x="${x(l)}" y="${H - PAD.b + 16}" text-anchor="middle" font-size="11">${l}x</text>`);
  parts.push(`<text x="${W / 2}" y="${H - 8}" text-anchor="middle" font-size="12">offered load (x capacity)</text>`);
  parts.push(
    `<text x="14" y="${H / 2}" transform="rotate(-90 14 ${H / 2})" text-anchor="middle" font-size="12">goodput (share of capacity)</text>`,
  );
  curves.forEach((c, i) => {
    const pts = [...c.points].sort((a, b) => a.load - b.load);
    const color = COLORS[i % COLORS.length];
    parts.push(
      `<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.map((p) => `${x(p.load).toFixed(1)},${y(p.goodput).toFixed(1)}`).join(' ')}"/>`,
    );
    for (const p of pts)
      parts.push(`<circle cx="${x(p.load).toFixed(1)}" cy="${y(p.goodput).toFixed(1)}" r="3" fill="${color}"/>`);
    parts.push(
      `<text x="${PAD.l + 10}" y="${PAD.t + 14 + 16 * i}" font-size="12" fill="${color}">${escapeXml(c.label)}</text>`,
    );
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif">${parts.join('')}</svg>\n`;
}

/** A text plot: one row per load, one bar per curve (share of capacity, 40 columns = 100%). */
export function textPlot(curves) {
  const loads = [...new Set(curves.flatMap((c) => c.points.map((p) => p.load)))].sort((a, b) => a - b);
  const width = Math.max(...curves.map((c) => c.label.length));
  const lines = ['goodput, share of capacity (| = 100%)'];
  for (const load of loads) {
    for (const c of curves) {
      const p = c.points.find((q) => q.load === load);
      if (!p) continue;
      const n = Math.round(Math.min(1.2, Math.max(0, p.goodput)) * 40);
      const bar = '#'.repeat(Math.min(n, 40)) + (n > 40 ? `|${'#'.repeat(n - 40)}` : `${' '.repeat(40 - n)}|`);
      lines.push(`${`${load}x`.padStart(5)} ${c.label.padEnd(width)} ${bar} ${(p.goodput * 100).toFixed(0)}%`);
    }
  }
  return lines.join('\n');
}

function escapeXml(s) {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
}
