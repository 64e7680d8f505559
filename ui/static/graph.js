// Squall UI: the topology graph, drawn from /api/v1/topology/:id/visualization.
//
// A layered layout: a component's column is its longest path from a spout, and a column's
// order follows its inputs' rows (fewer crossings). Streams between the same two components
// share one edge and one label; an edge that skips columns runs in a lane above the nodes,
// so it crosses no node and its label sits on its own line. Labels are then moved off any
// node or label they would cover. Internal streams ($checkpoint, Trident's $batch, ...) are
// dashed and grey, so the data's path reads first.
"use strict";

const Graph = (() => {
  const FONT = 'system-ui, -apple-system, "Segoe UI", sans-serif';
  const GY = 28, PAD = 20, LANE = 26, LINE = 12;
  let measureCtx = null;

  const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;",
    ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
  const internal = (stream) => stream.startsWith("__") || stream.startsWith("$");

  function width(text, px, weight = 400) {
    measureCtx = measureCtx || document.createElement("canvas").getContext("2d");
    measureCtx.font = `${weight} ${px}px ${FONT}`;
    return measureCtx.measureText(text).width;
  }
  function fit(text, px, weight, max) {
    if (width(text, px, weight) <= max) return text;
    let s = text;
    while (s.length > 1 && width(s + "…", px, weight) > max) s = s.slice(0, -1);
    return s + "…";
  }
  // A name too long for its box goes on two lines, broken after a - _ . or $ if it can be.
  function nameLines(name, max) {
    if (width(name, 13, 600) <= max) return [name];
    let cut = 0;
    for (let i = 1; i < name.length; i++) {
      if ("-_.$".includes(name[i - 1]) && width(name.slice(0, i), 13, 600) <= max) cut = i;
    }
    if (!cut) cut = [...name].findIndex((_, i) => width(name.slice(0, i + 1), 13, 600) > max);
    return [name.slice(0, cut), fit(name.slice(cut), 13, 600, max)];
  }

  function columns(vis, ids) {
    const depth = {};
    const d = (c, seen) => {
      if (depth[c] !== undefined) return depth[c];
      if (seen.has(c)) return 0;  // a cycle: cut it here
      seen.add(c);
      const ins = (vis[c][":inputs"] || []).map((i) => i.component).filter((p) => ids.includes(p) && p !== c);
      depth[c] = ins.length ? 1 + Math.max(...ins.map((p) => d(p, seen))) : 0;
      seen.delete(c);
      return depth[c];
    };
    ids.forEach((c) => d(c, new Set()));
    const cols = [];
    ids.forEach((c) => (cols[depth[c]] = cols[depth[c]] || []).push(c));
    const row = {};
    cols.forEach((cs, k) => {
      if (!cs) { cols[k] = []; return; }
      const bary = (c) => {
        const rs = (vis[c][":inputs"] || []).map((i) => row[i.component]).filter((r) => r !== undefined);
        return rs.length ? rs.reduce((a, b) => a + b, 0) / rs.length : 0;
      };
      cs.sort((a, b) => bary(a) - bary(b) || a.localeCompare(b));
      cs.forEach((c, r) => { row[c] = r; });
    });
    return {depth, cols, row};
  }

  function nodeLine(v) {
    return `${v[":type"]} · ${v[":type"] === "bolt" ? "cap " + Number(v[":capacity"] || 0).toFixed(2) + " · " : ""}` +
      `${Number(v[":latency"] || 0).toFixed(3)} ms`;
  }

  // "stream · grouping" per stream (two at most), or on two lines each if the gap is narrow.
  function labelLines(streams, max) {
    const shown = streams.length > 2 ? streams.slice(0, 1) : streams;
    const lines = [];
    for (const s of shown) {
      const one = `${s.stream} · ${s.grouping}`;
      if (max === undefined || width(one, 10) <= max) lines.push(one);
      else lines.push(fit(s.stream, 10, 400, max), fit("· " + s.grouping, 10, 400, max));
    }
    if (streams.length > 2) lines.push(`+${streams.length - 1} more streams`);
    return lines;
  }

  function draw(el, vis) {
    const ids = Object.keys(vis).filter((c) => !c.startsWith("__")).sort();
    const {depth, cols} = columns(vis, ids);
    // Edges: one per (from, to), user streams first.
    const edges = [];
    const byPair = {};
    for (const c of ids) {
      for (const i of vis[c][":inputs"] || []) {
        if (!ids.includes(i.component)) continue;
        const k = i.component + "\u0000" + c;
        if (!byPair[k]) edges.push(byPair[k] = {from: i.component, to: c, streams: []});
        byPair[k].streams.push(i);
      }
    }
    for (const e of edges) {
      e.streams.sort((a, b) => internal(a.stream) - internal(b.stream) || a.stream.localeCompare(b.stream));
      e.system = e.streams.every((s) => internal(s.stream));
      e.span = depth[e.to] - depth[e.from];
    }
    // Boxes as wide as the names and gaps as wide as the labels, when the page has room;
    // else narrower boxes (names on two lines), then narrower gaps (labels on more lines),
    // then the whole drawing scaled down.
    const avail = Math.max(320, el.clientWidth - 2), C = cols.length;
    const adjacent = edges.filter((e) => e.span === 1);
    let NW = Math.min(240, Math.max(150, ...ids.map((c) =>
      Math.max(width(c, 13, 600), width(nodeLine(vis[c]), 11)) + 22)));
    let GX = Math.min(240, Math.max(110, ...adjacent.map((e) =>
      Math.max(...labelLines(e.streams).map((l) => width(l, 10))) + 32)));
    const total = () => 2 * PAD + C * NW + (C - 1) * GX;
    if (total() > avail) NW = Math.max(170, Math.floor((avail - 2 * PAD - (C - 1) * GX) / C));
    if (total() > avail) GX = Math.max(100, Math.floor((avail - 2 * PAD - C * NW) / Math.max(1, C - 1)));
    for (const e of edges) {
      e.lines = labelLines(e.streams, e.span === 1 ? GX - 20 : undefined);
      e.w = Math.max(...e.lines.map((l) => width(l, 10))) + 8;
    }
    const names = {};
    for (const c of ids) names[c] = nameLines(c, NW - 20);
    const NH = Object.values(names).some((n) => n.length > 1) ? 68 : 54;
    const lanes = edges.filter((e) => e.span !== 1);
    lanes.forEach((e, i) => { e.lane = PAD + i * LANE + LINE; });
    const top = PAD + lanes.length * LANE + (lanes.length ? 8 : 0);
    const pos = {};
    cols.forEach((cs, k) => cs.forEach((c, r) => {
      pos[c] = {x: PAD + k * (NW + GX), y: top + r * (NH + GY)};
    }));
    const rows = Math.max(1, ...cols.map((cs) => cs.length));
    const W = 2 * PAD + cols.length * NW + Math.max(0, cols.length - 1) * GX;
    const nodeBoxes = ids.map((c) => ({x: pos[c].x, y: pos[c].y, w: NW, h: NH}));

    // Paths and where each label would like to be.
    for (const e of edges) {
      const a = pos[e.from], b = pos[e.to];
      const x1 = a.x + NW, y1 = a.y + NH / 2, x2 = b.x, y2 = b.y + NH / 2;
      const h = e.lines.length * LINE + 4;
      if (e.span === 1) {
        e.d = `M${x1},${y1} C${x1 + GX / 2},${y1} ${x2 - GX / 2},${y2} ${x2},${y2}`;
        e.box = {x: (x1 + x2) / 2 - e.w / 2, y: (y1 + y2) / 2 - h - 2, w: e.w, h};
      } else {
        // Up into the lane just after the source, along it, down just before the target.
        const ly = e.lane, xa = x1 + 14, xb = x2 - 14;
        e.d = `M${x1},${y1} L${xa - 8},${y1} Q${xa},${y1} ${xa},${y1 - 8} L${xa},${ly + 8} Q${xa},${ly} ${xa + 8},${ly} ` +
          `L${xb - 8},${ly} Q${xb},${ly} ${xb},${ly + 8} L${xb},${y2 - 8} Q${xb},${y2} ${xb + 6},${y2} L${x2},${y2}`;
        const mid = (xa + xb) / 2;
        e.lines = [e.lines.join("; ")];
        e.w = width(e.lines[0], 10) + 8;
        e.box = {x: mid - e.w / 2, y: ly - LINE - 4, w: e.w, h: LINE + 4};
      }
    }
    // Move each label off the nodes and the labels placed before it: the nearest free
    // height, up or down in steps.
    const hit = (p, q) => p.x < q.x + q.w && q.x < p.x + p.w && p.y < q.y + q.h && q.y < p.y + p.h;
    const placed = [];
    for (const e of edges.slice().sort((p, q) => p.box.x - q.box.x || p.box.y - q.box.y)) {
      const y0 = e.box.y;
      for (let k = 0; k < 40; k++) {
        const dy = (k % 2 ? 1 : -1) * Math.ceil(k / 2) * 6;
        const b = {...e.box, y: y0 + dy};
        if (b.y < 2) continue;
        if (!placed.some((p) => hit(b, p)) && !nodeBoxes.some((n) => hit(b, n))) { e.box = b; break; }
      }
      placed.push(e.box);
    }
    const H = Math.max(top + rows * (NH + GY), ...placed.map((b) => b.y + b.h)) + PAD;

    let paths = "", labels = "", nodes = "";
    for (const e of edges) {
      const stroke = e.system ? "#cbd5e1" : "#64748b";
      const all = e.streams.map((s) => `${s.stream} · ${s.grouping}`).join("\n");
      paths += `<path class="edge${e.system ? " internal" : ""}" data-from="${esc(e.from)}" data-to="${esc(e.to)}" d="${e.d}" ` +
        `fill="none" stroke="${stroke}" stroke-width="1.5"${e.system ? ' stroke-dasharray="5 4"' : ""} ` +
        `marker-end="url(#${e.system ? "arrow-int" : "arrow"})"><title>${esc(all)}</title></path>`;
      const b = e.box;
      labels += `<g class="edge-label" data-from="${esc(e.from)}" data-to="${esc(e.to)}"><title>${esc(all)}</title>` +
        `<rect x="${b.x}" y="${b.y}" width="${b.w}" height="${b.h}" rx="3" fill="#fff" fill-opacity="0.92"/>` +
        e.lines.map((l, i) => `<text x="${b.x + b.w / 2}" y="${b.y + 11 + i * LINE}" font-size="10" text-anchor="middle" ` +
          `fill="${e.system ? "#94a3b8" : "#475569"}">${esc(l)}</text>`).join("") + `</g>`;
    }
    for (const c of ids) {
      const v = vis[c], p = pos[c];
      const hot = v[":capacity"] > 0.8;
      nodes += `<g class="node" data-component="${esc(c)}"><title>${esc(c)}</title>` +
        `<rect x="${p.x}" y="${p.y}" width="${NW}" height="${NH}" rx="6" fill="${v[":type"] === "spout" ? "#eff6ff" : "#f8fafc"}" stroke="${hot ? "#b91c1c" : "#64748b"}"/>` +
        `<text x="${p.x + 10}" y="${p.y + 21}" font-size="13" font-weight="600" fill="#1d2330">` +
        names[c].map((l, i) => `<tspan x="${p.x + 10}" dy="${i ? 15 : 0}">${esc(l)}</tspan>`).join("") + `</text>` +
        `<text x="${p.x + 10}" y="${p.y + NH - 14}" font-size="11" fill="#6b7280">${esc(fit(nodeLine(v), 11, 400, NW - 20))}</text></g>`;
    }
    const marker = (id, fill) => `<marker id="${id}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="${fill}"/></marker>`;
    // Drawn at its own size, or scaled down to the box's width (never wider than the page).
    el.innerHTML = `<svg viewBox="0 0 ${W} ${H}" style="max-width:${W}px" font-family='${FONT}'>` +
      `<defs>${marker("arrow", "#64748b")}${marker("arrow-int", "#cbd5e1")}</defs>${paths}${nodes}${labels}</svg>`;
  }

  return {draw};
})();
