// Squall UI: the live throughput and latency chart of each component.
//
// Counters reach Nimbus when a supervisor reports (supervisor.heartbeat.frequency.secs, 5 s by
// default), not when the page polls (every 3 s): a sample is kept only when the component's
// counters were taken anew (statsTime moved), and a rate is the counts' change over the
// change of that time. A poll that finds nothing new adds no point, so no false zero.
"use strict";

const Charts = (() => {
  const WINDOW_SECS = 300;     // the time axis shows at most the last 5 minutes
  const MIN_SPAN_SECS = 30;    // and at least 30 s, so the first points are not a smear
  const H = 190, M = {l: 54, r: 54, t: 22, b: 36};
  const RATE = "#2563eb", LAT = "#d97706";
  const topologies = {};       // topology id -> {start, comps: {component -> [sample]}}

  const key = (c) => "chart-" + c.replace(/[^A-Za-z0-9_-]/g, "_");
  const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;",
    ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));

  // One sample per new statsTime: {t (the page's clock, s), st (the counts' own time), count,
  // lat (mean ms since start, unrounded), n (what the mean is over)}.
  function record(id, page) {
    const now = Date.now() / 1000;
    const h = topologies[id] || (topologies[id] = {start: now, comps: {}});
    const add = (comp, st, count, lat, n) => {
      if (!st) return;  // no counters yet
      const pts = h.comps[comp] || (h.comps[comp] = []);
      const last = pts[pts.length - 1];
      if (last && last.st === st) return;  // the same counts as last poll: nothing arrived
      pts.push({t: now, st, count: Number(count) || 0, lat: Number(lat) || 0, n: Number(n) || 0});
      while (pts.length > 2 && pts[1].t < now - WINDOW_SECS) pts.shift();
    };
    for (const s of page.spouts) add(s.spoutId, s.statsTime, s.acked, s.completeLatencyMs, s.acked);
    for (const b of page.bolts) add(b.boltId, b.statsTime, b.executed, b.executeLatencyMs, b.executed);
  }

  // Rates between consecutive samples; a counter that went down (a reset) gives no point.
  function rates(pts) {
    const out = [];
    for (let i = 1; i < pts.length; i++) {
      const a = pts[i - 1], b = pts[i];
      const dt = b.st - a.st, dc = b.count - a.count, dn = b.n - a.n;
      if (dt <= 0 || dc < 0) continue;
      // The mean over just this interval, from the two means since start.
      const lat = dn > 0 ? (b.lat * b.n - a.lat * a.n) / dn : null;
      out.push({t: b.t, dt, rate: dc / dt, lat: lat !== null && lat >= 0 ? lat : null});
    }
    return out;
  }

  // 0 .. top in `n` steps of 1, 2, 2.5 or 5 times a power of ten.
  function ticks(max, n) {
    const raw = Math.max(max, 1e-9) / n;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * p).find((s) => s >= raw - 1e-12);
    return Array.from({length: n + 1}, (_, i) => i * step);
  }
  function fmt(v) {
    const a = Math.abs(v);
    if (a >= 1e6) return +(v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + "M";
    if (a >= 1e3) return +(v / 1e3).toFixed(a >= 1e4 ? 0 : 1) + "k";
    if (a >= 10 || v === 0) return String(Math.round(v));
    return String(+v.toPrecision(2));
  }
  function fmtSpan(s) {
    return s >= 90 ? `${Math.round(s / 60)} min` : `${Math.round(s)} s`;
  }

  function box(c) {
    const what = c.kind === "spout" ? "acked" : "executed";
    return `<div class="chart" id="${key(c.id)}" data-component="${esc(c.id)}" data-kind="${c.kind}">` +
      `<h4>${esc(c.id)} <span class="muted">${c.kind}</span>` +
      `<span class="now"><b class="rate" style="color:${RATE}">–</b> ${what}/s · ` +
      `<b class="lat" style="color:${LAT}">–</b> ms</span></h4>` +
      `<svg role="img" aria-label="${esc(c.id)}: ${what} per second and latency over time"></svg></div>`;
  }

  function draw(id, comp) {
    const el = document.getElementById(key(comp));
    if (!el) return;
    const h = topologies[id] || {start: Date.now() / 1000, comps: {}};
    const now = Date.now() / 1000;
    const span = Math.min(WINDOW_SECS, Math.max(MIN_SPAN_SECS, now - h.start));
    const t0 = now - span;
    const pts = rates(h.comps[comp] || []).filter((p) => p.t >= t0);
    const svg = el.querySelector("svg");
    const W = Math.max(240, Math.floor(svg.getBoundingClientRect().width));
    const pw = W - M.l - M.r, ph = H - M.t - M.b;
    const rt = ticks(Math.max(1, ...pts.map((p) => p.rate)) * 1.05, 4);
    const lats = pts.filter((p) => p.lat !== null).map((p) => p.lat);
    const lt = ticks(Math.max(0.001, ...lats) * 1.05, 4);
    const x = (t) => M.l + pw * (t - t0) / span;
    const yr = (v) => M.t + ph * (1 - v / rt[4]);
    const yl = (v) => M.t + ph * (1 - v / lt[4]);
    const kind = el.dataset.kind === "spout" ? "acked" : "executed";
    let g = `<text class="unit" x="2" y="12" fill="${RATE}">${kind}/s</text>` +
      `<text class="unit" x="${W - 2}" y="12" text-anchor="end" fill="${LAT}">latency ms</text>`;
    // y axes: gridlines at the rate ticks, the latency scale on the right at the same heights
    g += `<g class="y-axis">` + rt.map((v, i) =>
      `<line x1="${M.l}" x2="${W - M.r}" y1="${yr(v)}" y2="${yr(v)}" stroke="${i ? "#eef0f3" : "#cbd5e1"}"/>` +
      `<text x="${M.l - 6}" y="${yr(v) + 4}" text-anchor="end">${fmt(v)}</text>` +
      `<text x="${W - M.r + 6}" y="${yr(v) + 4}">${fmt(lt[i])}</text>`).join("") + `</g>`;
    // x axis: seconds or minutes before now
    const step = [5, 10, 15, 30, 60, 120].find((s) => span / s <= 6) || 300;
    let xt = "";
    for (let a = 0; a <= span + 1e-6; a += step) {
      const xx = x(now - a);
      xt += `<line x1="${xx}" x2="${xx}" y1="${M.t + ph}" y2="${M.t + ph + 4}" stroke="#94a3b8"/>` +
        `<text x="${xx}" y="${M.t + ph + 16}" text-anchor="middle">${a ? "−" + (a % 60 ? `${a} s` : `${a / 60} min`) : "now"}</text>`;
    }
    const cadence = pts.length ? pts.map((p) => p.dt).sort((a, b) => a - b)[pts.length >> 1] : 0;
    g += `<g class="x-axis">${xt}<text class="title" x="${M.l + pw / 2}" y="${H - 3}" text-anchor="middle">` +
      `last ${fmtSpan(span)}${cadence ? ` · a point per stats report, every ~${fmtSpan(cadence)}` : ""}</text></g>`;
    // The lines break where reports stopped for longer than a few of their intervals.
    const path = (get, y) => {
      let d = "", prev = null;
      for (const p of pts) {
        const v = get(p);
        if (v === null) { prev = null; continue; }
        const gap = prev && p.t - prev.t > Math.max(4 * cadence, 15);
        d += `${prev && !gap ? "L" : "M"}${x(p.t).toFixed(1)},${y(v).toFixed(1)}`;
        prev = p;
      }
      return d;
    };
    g += `<path class="lat-line" d="${path((p) => p.lat, yl)}" fill="none" stroke="${LAT}" stroke-width="1.5" stroke-dasharray="4 3"/>`;
    g += `<path class="rate-line" d="${path((p) => p.rate, yr)}" fill="none" stroke="${RATE}" stroke-width="2"/>`;
    g += pts.map((p) => `<circle class="pt" cx="${x(p.t).toFixed(1)}" cy="${yr(p.rate).toFixed(1)}" r="2.5" fill="${RATE}"/>`).join("");
    if (!pts.length) {
      g += `<text x="${M.l + pw / 2}" y="${M.t + ph / 2}" text-anchor="middle" class="waiting">` +
        `waiting for two reports of the counters</text>`;
    }
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("height", H);
    svg.innerHTML = g;
    el.dataset.points = String(pts.length);
    el.dataset.rates = JSON.stringify(pts.map((p) => +p.rate.toFixed(1)));
    el.dataset.dts = JSON.stringify(pts.map((p) => +p.dt.toFixed(2)));
    el.dataset.lastRate = pts.length ? pts[pts.length - 1].rate.toFixed(1) : "0";
    el.dataset.span = String(Math.round(span));
    const last = pts[pts.length - 1];
    el.querySelector(".rate").textContent = last ? Math.round(last.rate).toLocaleString("en-US") : "–";
    el.querySelector(".lat").textContent = last && last.lat !== null ? last.lat.toFixed(3) : "–";
  }

  // A resize re-measures the charts on the page now (they are drawn at their pixel width).
  let current = null;
  function drawAll(id, comps) {
    current = {id, comps};
    for (const c of comps) draw(id, c.id);
  }
  window.addEventListener("resize", () => { if (current) drawAll(current.id, current.comps); });

  return {record, box, drawAll};
})();
