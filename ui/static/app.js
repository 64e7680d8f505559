// Squall UI: plain JavaScript over the REST API v1 (no build step, nothing downloaded).
"use strict";

const POLL_MS = 3000;          // how often the open page refreshes
const CHART_POINTS = 60;       // samples kept per chart (3 minutes at POLL_MS)
const $ = (sel) => document.querySelector(sel);
let timer = null;
let view = null;               // {kind, id, component}
let seq = 0;                   // the latest refresh; an older one that answers late is dropped
const history = {};            // topology id -> {component -> [{t, count, latency}]}

function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;",
    '"': "&quot;", "'": "&#39;"}[c]));
}
function num(n) { return Number(n || 0).toLocaleString("en-US"); }
function windowParam() { return $("#window").value; }

async function api(path, opts = {}) {
  const res = await fetch(path, {credentials: "same-origin", ...opts,
    headers: {"X-Squall-Csrf": "1", ...(opts.headers || {})}});
  let body = null;
  try { body = await res.json(); } catch (e) { body = null; }
  if (!res.ok) {
    const msg = body && body.errorMessage ? body.errorMessage : `${res.status} ${res.statusText}`;
    const err = new Error(msg);
    err.status = res.status;
    throw err;
  }
  return body;
}

function toast(text, bad) {
  const t = $("#toast");
  t.textContent = text;
  t.className = "toast" + (bad ? " bad" : "");
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, bad ? 8000 : 3500);
}

function table(headers, rows, opts = {}) {
  const head = headers.map((h) => `<th class="${h.num ? "num" : ""}">${esc(h.label)}</th>`).join("");
  const body = rows.length ? rows.map((r) => "<tr>" + r.map((c, i) =>
    `<td class="${headers[i].num ? "num " : ""}${c && c.cls ? c.cls : ""}">${c && c.html !== undefined ? c.html : esc(c)}</td>`
  ).join("") + "</tr>").join("") : `<tr><td colspan="${headers.length}" class="muted">${esc(opts.empty || "none")}</td></tr>`;
  return `<table${opts.id ? ` id="${opts.id}"` : ""}><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

function pill(status) { return {html: `<span class="pill ${esc(status)}">${esc(status)}</span>`}; }
function health(h) { return {html: esc(h), cls: h && h !== "ok" ? "health-bad" : ""}; }
function logLink(url, text) { return url ? {html: `<a href="${esc(url)}" target="_blank">${esc(text || "log")}</a>`} : ""; }

// ---- routing ---------------------------------------------------------------------------
function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (parts[0] === "topology" && parts[1] && parts[2] === "component" && parts[3]) {
    view = {kind: "component", id: parts[1], component: parts[3]};
  } else if (parts[0] === "topology" && parts[1]) {
    view = {kind: "topology", id: parts[1]};
  } else {
    view = {kind: "cluster"};
  }
  refresh(true);
}

async function refresh(first) {
  clearTimeout(timer);
  const mine = ++seq, v = view;
  const current = () => mine === seq;  // a route change or a newer refresh supersedes this one
  try {
    if (v.kind === "cluster") await showCluster(current);
    else if (v.kind === "topology") await showTopology(v.id, first, current);
    else await showComponent(v.id, v.component, current);
    if (current()) $("#updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    if (!current()) return;
    if (e.status === 404 && v.kind !== "cluster") {
      $("#main").innerHTML = `<p class="muted">${esc(e.message)}</p><p><a href="#/">Back to the cluster</a></p>`;
    } else {
      $("#updated").textContent = "error: " + e.message;
    }
  }
  if (current() && $("#dialog").hidden) timer = setTimeout(() => refresh(false), POLL_MS);
}

// ---- cluster ---------------------------------------------------------------------------
async function showCluster(current) {
  const [cs, nim, sup, top] = await Promise.all([api("/api/v1/cluster/summary"),
    api("/api/v1/nimbus/summary"), api("/api/v1/supervisor/summary"), api("/api/v1/topology/summary")]);
  if (!current()) return;
  $("#crumbs").innerHTML = "";
  const cards = [["Topologies", cs.topologies], ["Supervisors", cs.supervisors],
    ["Slots used", `${cs.slotsUsed} / ${cs.slotsTotal}`], ["Slots free", cs.slotsFree],
    ["Executors", cs.executorsTotal], ["Tasks", cs.tasksTotal], ["Version", cs.squallVersion]];
  $("#main").innerHTML =
    `<h2>Cluster</h2><div class="cards">${cards.map(([k, v]) =>
      `<div class="card"><div class="v">${esc(v)}</div><div class="k">${esc(k)}</div></div>`).join("")}</div>` +
    `<h2>Topologies</h2>` + table([{label: "Name"}, {label: "Id"}, {label: "Owner"}, {label: "Status"},
      {label: "Health"}, {label: "Workers", num: 1}, {label: "Executors", num: 1},
      {label: "Tasks", num: 1}, {label: "Uptime"}],
      top.topologies.map((t) => [{html: `<a href="#/topology/${encodeURIComponent(t.id)}">${esc(t.name)}</a>`},
        t.id, t.owner, pill(t.status), health(t.health), t.workersTotal, t.executorsTotal, t.tasksTotal, t.uptime]),
      {id: "topologies", empty: "No topologies running. Submit one with squall jar."}) +
    `<h2>Nimbus</h2>` + table([{label: "Host"}, {label: "Port", num: 1}, {label: "Status"},
      {label: "Version"}, {label: "Uptime"}],
      nim.nimbuses.map((n) => [n.host, n.port, n.status, n.version, n.nimbusUpTime]), {id: "nimbuses"}) +
    `<h2>Supervisors</h2>` + table([{label: "Id"}, {label: "Host"}, {label: "Slots", num: 1},
      {label: "Used", num: 1}, {label: "Free", num: 1}, {label: "Uptime"}],
      sup.supervisors.map((s) => [s.id, s.host, s.slotsTotal, s.slotsUsed, s.slotsFree, s.uptime]),
      {id: "supervisors"});
}

// ---- topology --------------------------------------------------------------------------
async function showTopology(id, first, current) {
  const w = windowParam();
  const t = await api(`/api/v1/topology/${encodeURIComponent(id)}?window=${encodeURIComponent(w)}`);
  // Rates come from all-time counters, whatever window the tables show.
  const all = w === ":all-time" ? t : await api(`/api/v1/topology/${encodeURIComponent(id)}`);
  if (!current()) return;
  record(id, all);
  $("#crumbs").innerHTML = `› <a href="#/topology/${encodeURIComponent(id)}">${esc(t.name)}</a>`;
  const restarts = t.recentRestarts ? `<span class="health-bad">workers restarting: ${t.recentRestarts} in ${t.restartWindowSeconds} s</span>` : "";
  const comps = [...t.spouts.map((s) => ({id: s.spoutId, kind: "spout"})), ...t.bolts.map((b) => ({id: b.boltId, kind: "bolt"}))];
  const tid = encodeURIComponent(id);
  const compLink = (c) => ({html: `<a href="#/topology/${tid}/component/${encodeURIComponent(c)}">${esc(c)}</a>`});
  const err = (x) => x.lastError ? {html: `${esc(x.lastError)} <span class="muted">(${esc(x.errorHost)}:${esc(x.errorPort)}, ${esc(x.errorLapsedSecs)} s ago)</span>`, cls: "err"} : "";
  let html =
    `<h2>Topology ${esc(t.name)} <span class="muted">${esc(t.id)}</span></h2>` +
    `<div class="cards">` +
      [["Status", pill(t.status).html], ["Owner", esc(t.owner)], ["Uptime", esc(t.uptime)],
       ["Workers", t.workersTotal], ["Executors", t.executorsTotal], ["Tasks", t.tasksTotal],
       ["Message timeout", t.msgTimeout + " s"]].map(([k, v]) =>
        `<div class="card"><div class="v">${v}</div><div class="k">${esc(k)}</div></div>`).join("") +
    `</div>${restarts}` +
    `<div class="actions">` +
      `<button id="btn-activate" type="button">Activate</button>` +
      `<button id="btn-deactivate" type="button">Deactivate</button>` +
      `<button id="btn-rebalance" type="button">Rebalance</button>` +
      `<button id="btn-kill" type="button" class="danger">Kill</button>` +
    `</div>` +
    `<h2>Topology stats</h2>` + table([{label: "Window"}, {label: "Emitted", num: 1},
      {label: "Transferred", num: 1}, {label: "Complete latency (ms)", num: 1},
      {label: "Acked", num: 1}, {label: "Failed", num: 1}],
      t.topologyStats.map((s) => [s.windowPretty, num(s.emitted), num(s.transferred),
        s.completeLatency, num(s.acked), num(s.failed)]), {id: "topology-stats"}) +
    `<h2>Throughput and latency <span class="muted">(live, every ${POLL_MS / 1000} s)</span></h2>` +
    `<div class="charts">${comps.map((c) => chartBox(id, c)).join("")}</div>` +
    `<h2>Spouts <span class="muted">(${esc(t.windowHint)})</span></h2>` + table([{label: "Id"},
      {label: "Executors", num: 1}, {label: "Tasks", num: 1}, {label: "Emitted", num: 1},
      {label: "Transferred", num: 1}, {label: "Complete latency (ms)", num: 1},
      {label: "p99 (ms)", num: 1}, {label: "Acked", num: 1}, {label: "Failed", num: 1},
      {label: "Last error"}],
      t.spouts.map((s) => [compLink(s.spoutId), s.executors, s.tasks, num(s.emitted),
        num(s.transferred), s.completeLatency, s.completeLatencyP99, num(s.acked), num(s.failed), err(s)]),
      {id: "spouts"}) +
    `<div id="kafka-lag-box">${lagCache[id] ? lagHtml(lagCache[id].v) : ""}</div>` +
    `<h2>Bolts <span class="muted">(${esc(t.windowHint)})</span></h2>` + table([{label: "Id"},
      {label: "Executors", num: 1}, {label: "Tasks", num: 1}, {label: "Emitted", num: 1},
      {label: "Transferred", num: 1}, {label: "Capacity", num: 1},
      {label: "Execute latency (ms)", num: 1}, {label: "Executed", num: 1},
      {label: "Process latency (ms)", num: 1}, {label: "Acked", num: 1}, {label: "Failed", num: 1},
      {label: "Last error"}],
      t.bolts.map((b) => [compLink(b.boltId), b.executors, b.tasks, num(b.emitted),
        num(b.transferred), {html: esc(b.capacity), cls: Number(b.capacity) > 0.8 ? "cap-hot" : ""},
        b.executeLatency, num(b.executed), b.processLatency, num(b.acked), num(b.failed), err(b)]),
      {id: "bolts"}) +
    `<h2>Topology graph</h2><div class="graph" id="graph"></div>` +
    `<h2>Workers</h2>` + table([{label: "Host"}, {label: "Port", num: 1}, {label: "Executors", num: 1},
      {label: "Components"}, {label: "Uptime"}, {label: "Log"}],
      t.workers.map((wk) => [wk.host, wk.port, wk.executorsTotal,
        Object.entries(wk.componentNumTasks).map(([c, n]) => `${c} (${n})`).join(", "),
        wk.uptime, logLink(wk.workerLogLink, `${wk.host}:${wk.port}`)]), {id: "workers"}) +
    `<h2>Errors</h2>` + table([{label: "Time"}, {label: "Component"}, {label: "Where"}, {label: "Error"}],
      t.errors.slice().reverse().map((e) => [new Date(e.errorTime * 1000).toLocaleString(), e.component,
        logLink(e.errorWorkerLogLink, `${e.errorHost}:${e.errorPort}`), {html: esc(e.error), cls: "err"}]),
      {id: "errors", empty: "No errors reported."});
  $("#main").innerHTML = html;
  for (const c of comps) drawChart(id, c);
  wireActions(t);
  showLag(id, current);  // not awaited: the broker's answer must not hold the page
  // The graph's shape is fetched once; its numbers are this refresh's.
  if (first || !graphCache[id]) {
    const vis = await api(`/api/v1/topology/${tid}/visualization`);
    if (!current()) return;
    graphCache[id] = vis;
  }
  const vis = graphCache[id];
  for (const b of t.bolts) if (vis[b.boltId]) {
    vis[b.boltId][":capacity"] = Number(b.capacity);
    vis[b.boltId][":latency"] = Number(b.executeLatency);
  }
  for (const s of t.spouts) if (vis[s.spoutId]) vis[s.spoutId][":latency"] = Number(s.completeLatency);
  drawGraph(vis);
}
const graphCache = {};

// ---- Kafka lag (storm-kafka-monitor's figures: the UI asks the broker, bounded) ----------
const LAG_MS = 10000;  // the broker is asked at most this often per topology
const lagCache = {};
async function showLag(id, current) {
  const c = lagCache[id];
  if (!c || Date.now() - c.t >= LAG_MS) {
    lagCache[id] = {t: Date.now(), v: c ? c.v : {}};  // one request at a time
    try {
      lagCache[id].v = await api(`/api/v1/topology/${encodeURIComponent(id)}/lag`);
    } catch (e) {
      lagCache[id].v = {"": {errorInfo: String(e.message || e)}};
    }
  }
  const box = $("#kafka-lag-box");
  if (current() && box) box.innerHTML = lagHtml(lagCache[id].v);
}
function lagHtml(lag) {
  const rows = [];
  let total = 0;
  for (const [sid, s] of Object.entries(lag)) {
    if (s.errorInfo) { rows.push([sid, {html: esc(s.errorInfo), cls: "err"}, "", "", "", ""]); continue; }
    for (const [topic, parts] of Object.entries(s.spoutLagResult || {})) {
      const ps = Object.keys(parts).sort((a, b) => Number(a) - Number(b));
      for (const p of ps) {
        const r = parts[p];
        total += Number(r.lag) || 0;
        rows.push([sid, topic, p, num(r.consumerCommittedOffset), num(r.logHeadOffset),
          {html: num(r.lag), cls: r.lag > 0 ? "lag-behind" : ""}]);
      }
    }
  }
  if (!rows.length) return "";
  return `<h2>Kafka lag <span class="muted">(total ${num(total)}; committed offsets against the log end)</span></h2>` +
    table([{label: "Spout"}, {label: "Topic"}, {label: "Partition", num: 1},
      {label: "Committed offset", num: 1}, {label: "Log end offset", num: 1}, {label: "Lag", num: 1}],
      rows, {id: "kafka-lag"});
}

// ---- live charts -----------------------------------------------------------------------
function record(id, t) {
  const h = history[id] || (history[id] = {});
  const now = Date.now() / 1000;
  for (const s of t.spouts) push(h, s.spoutId, now, s.acked, Number(s.completeLatency));
  for (const b of t.bolts) push(h, b.boltId, now, b.executed, Number(b.executeLatency));
}
function push(h, comp, t, count, latency) {
  const pts = h[comp] || (h[comp] = []);
  pts.push({t, count, latency});
  if (pts.length > CHART_POINTS + 1) pts.shift();
}
function rates(pts) {
  const out = [];
  for (let i = 1; i < pts.length; i++) {
    const dt = pts[i].t - pts[i - 1].t;
    const dc = pts[i].count - pts[i - 1].count;
    out.push({t: pts[i].t, rate: dt > 0 && dc >= 0 ? dc / dt : 0, latency: pts[i].latency});
  }
  return out;
}
function chartBox(id, c) {
  const cid = "chart-" + c.id.replace(/[^A-Za-z0-9_-]/g, "_");
  return `<div class="chart" id="${cid}" data-component="${esc(c.id)}"><h4>${esc(c.id)} <span class="muted">${c.kind}</span></h4>` +
    `<svg viewBox="0 0 400 150" preserveAspectRatio="none"></svg>` +
    `<div class="legend"><span style="color:#2563eb">■ ${c.kind === "spout" ? "acked" : "executed"}/s <b class="rate"></b></span>` +
    `<span style="color:#d97706">■ ${c.kind === "spout" ? "complete" : "execute"} latency ms <b class="lat"></b></span>` +
    `<span class="scale"></span></div></div>`;
}
function drawChart(id, c) {
  const box = document.getElementById("chart-" + c.id.replace(/[^A-Za-z0-9_-]/g, "_"));
  if (!box) return;
  const pts = rates((history[id] || {})[c.id] || []);
  box.dataset.points = String(pts.length);
  box.dataset.lastRate = pts.length ? pts[pts.length - 1].rate.toFixed(1) : "0";
  const svg = box.querySelector("svg");
  const W = 400, H = 150, P = 4;
  const maxR = Math.max(1, ...pts.map((p) => p.rate));
  const maxL = Math.max(0.001, ...pts.map((p) => p.latency));
  const x = (i) => P + (W - 2 * P) * (pts.length > 1 ? i / (CHART_POINTS - 1) : 0);
  const line = (key, max) => pts.map((p, i) => `${x(i).toFixed(1)},${(H - P - (H - 2 * P) * p[key] / max).toFixed(1)}`).join(" ");
  svg.innerHTML =
    `<line x1="0" y1="${H - P}" x2="${W}" y2="${H - P}" stroke="#e5e7eb"/>` +
    `<polyline fill="none" stroke="#2563eb" stroke-width="2" points="${line("rate", maxR)}"/>` +
    `<polyline fill="none" stroke="#d97706" stroke-width="1.5" stroke-dasharray="4 3" points="${line("latency", maxL)}"/>`;
  // The scale goes in the legend: text inside the stretched SVG would be stretched too.
  box.querySelector(".scale").textContent = `top of chart: ${Math.round(maxR).toLocaleString("en-US")}/s · ${maxL.toFixed(3)} ms`;
  const last = pts[pts.length - 1];
  box.querySelector(".rate").textContent = last ? Math.round(last.rate).toLocaleString("en-US") : "–";
  box.querySelector(".lat").textContent = last ? last.latency.toFixed(3) : "–";
}

// ---- the graph -------------------------------------------------------------------------
function drawGraph(vis) {
  const ids = Object.keys(vis).filter((c) => !c.startsWith("__"));
  const depth = {};
  const d = (c, seen = new Set()) => {
    if (depth[c] !== undefined) return depth[c];
    if (seen.has(c)) return 0;
    seen.add(c);
    const ins = (vis[c][":inputs"] || []).map((i) => i.component).filter((p) => vis[p] && !p.startsWith("__"));
    depth[c] = ins.length ? 1 + Math.max(...ins.map((p) => d(p, seen))) : 0;
    return depth[c];
  };
  ids.forEach((c) => d(c));
  const cols = {};
  ids.forEach((c) => (cols[depth[c]] = cols[depth[c]] || []).push(c));
  const NW = 170, NH = 54, GX = 140, GY = 26;
  const pos = {};
  let maxRows = 1;
  Object.entries(cols).forEach(([col, cs]) => {
    maxRows = Math.max(maxRows, cs.length);
    cs.forEach((c, r) => { pos[c] = {x: 20 + col * (NW + GX), y: 20 + r * (NH + GY)}; });
  });
  const W = 40 + (Object.keys(cols).length) * (NW + GX), H = 40 + maxRows * (NH + GY);
  let edges = "", nodes = "";
  for (const c of ids) {
    for (const i of vis[c][":inputs"] || []) {
      const a = pos[i.component], b = pos[c];
      if (!a || !b) continue;
      const x1 = a.x + NW, y1 = a.y + NH / 2, x2 = b.x, y2 = b.y + NH / 2;
      edges += `<path d="M${x1},${y1} C${x1 + GX / 2},${y1} ${x2 - GX / 2},${y2} ${x2},${y2}" fill="none" stroke="#94a3b8" stroke-width="1.5" marker-end="url(#arrow)"/>` +
        `<text x="${(x1 + x2) / 2}" y="${(y1 + y2) / 2 - 4}" font-size="10" text-anchor="middle" fill="#64748b">${esc(i.stream)} · ${esc(i.grouping)}</text>`;
    }
    const v = vis[c], p = pos[c];
    const hot = v[":capacity"] > 0.8;
    nodes += `<g class="node" data-component="${esc(c)}"><rect x="${p.x}" y="${p.y}" width="${NW}" height="${NH}" rx="6" fill="${v[":type"] === "spout" ? "#eff6ff" : "#f8fafc"}" stroke="${hot ? "#b91c1c" : "#64748b"}"/>` +
      `<text x="${p.x + 10}" y="${p.y + 20}" font-size="13" font-weight="600" fill="#1d2330">${esc(c)}</text>` +
      `<text x="${p.x + 10}" y="${p.y + 40}" font-size="11" fill="#6b7280">${v[":type"]} · ${v[":type"] === "bolt" ? "cap " + Number(v[":capacity"]).toFixed(2) + " · " : ""}${Number(v[":latency"]).toFixed(3)} ms</text></g>`;
  }
  $("#graph").innerHTML = `<svg viewBox="0 0 ${W} ${H}" height="${H}"><defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#94a3b8"/></marker></defs>${edges}${nodes}</svg>`;
}

// ---- actions ---------------------------------------------------------------------------
function ask(title, text, fields, okLabel) {
  return new Promise((resolve) => {
    $("#dialog-title").textContent = title;
    $("#dialog-text").textContent = text;
    $("#dialog-fields").innerHTML = fields.map((f) =>
      `<label>${esc(f.label)}<input id="field-${f.id}" type="number" min="0" value="${esc(f.value ?? "")}"></label>`).join("");
    $("#dialog-ok").textContent = okLabel;
    $("#dialog").hidden = false;
    clearTimeout(timer);  // no refresh under an open dialog (refresh() does not re-arm then)
    const done = (ok) => {
      $("#dialog").hidden = true;
      const values = {};
      for (const f of fields) values[f.id] = $(`#field-${f.id}`).value;
      resolve(ok ? values : null);
      timer = setTimeout(() => refresh(false), POLL_MS);
    };
    $("#dialog-ok").onclick = () => done(true);
    $("#dialog-cancel").onclick = () => done(false);
  });
}

function wireActions(t) {
  const tid = encodeURIComponent(t.id);
  const post = async (path, body, what) => {
    try {
      await api(`/api/v1/topology/${tid}/${path}`, {method: "POST",
        headers: {"Content-Type": "application/json"}, body: JSON.stringify(body || {})});
      toast(`${what}: done`);
      refresh(false);
    } catch (e) { toast(`${what} failed: ${e.message}`, true); }
  };
  $("#btn-activate").onclick = () => post("activate", null, `Activate ${t.name}`);
  $("#btn-deactivate").onclick = () => post("deactivate", null, `Deactivate ${t.name}`);
  $("#btn-kill").onclick = async () => {
    const v = await ask(`Kill ${t.name}?`, "The spouts stop at once; the workers go after the wait, so tuples in flight can finish.",
      [{id: "wait", label: "Wait (seconds)", value: t.msgTimeout}], "Kill");
    if (v) post(`kill/${encodeURIComponent(v.wait || 0)}`, null, `Kill ${t.name}`);
  };
  $("#btn-rebalance").onclick = async () => {
    const v = await ask(`Rebalance ${t.name}?`, "Deactivates the topology for the wait, then reassigns its executors.",
      [{id: "wait", label: "Wait (seconds)", value: t.msgTimeout}, {id: "workers", label: "Workers", value: t.workersTotal}], "Rebalance");
    if (v) post(`rebalance/${encodeURIComponent(v.wait || 0)}`, {rebalanceOptions: {numWorkers: Number(v.workers) || undefined}}, `Rebalance ${t.name}`);
  };
}

// ---- component -------------------------------------------------------------------------
async function showComponent(id, comp, current) {
  const c = await api(`/api/v1/topology/${encodeURIComponent(id)}/component/${encodeURIComponent(comp)}?window=${encodeURIComponent(windowParam())}`);
  if (!current()) return;
  $("#crumbs").innerHTML = `› <a href="#/topology/${encodeURIComponent(id)}">${esc(c.name)}</a> › ${esc(comp)}`;
  const spout = c.componentType === "spout";
  const execHeaders = [{label: "Id"}, {label: "Host:port"}, {label: "Uptime"}, {label: "Emitted", num: 1},
    {label: "Transferred", num: 1}, ...(spout ? [{label: "Complete latency (ms)", num: 1}] :
      [{label: "Capacity", num: 1}, {label: "Execute latency (ms)", num: 1}, {label: "Executed", num: 1}]),
    {label: "Acked", num: 1}, {label: "Failed", num: 1}, {label: "Log"}];
  $("#main").innerHTML =
    `<h2>${esc(c.componentType)} ${esc(comp)} <span class="muted">of ${esc(c.name)} · ${c.executors} executors, ${c.tasks} tasks · ${esc(c.windowHint)}</span></h2>` +
    `<h2>Output streams</h2>` + table([{label: "Stream"}, {label: "Emitted", num: 1}, {label: "Transferred", num: 1}],
      c.outputStats.map((s) => [s.stream, num(s.emitted), num(s.transferred)]), {id: "output-stats"}) +
    `<h2>Executors</h2>` + table(execHeaders, c.executorStats.map((e) => [e.id, `${e.host}:${e.port}`, e.uptime,
      num(e.emitted), num(e.transferred), ...(spout ? [e.completeLatency] : [e.capacity, e.executeLatency, num(e.executed)]),
      num(e.acked), num(e.failed), logLink(e.workerLogLink)]), {id: "executors"}) +
    `<h2>Errors</h2>` + table([{label: "Time"}, {label: "Where"}, {label: "Error"}],
      c.componentErrors.slice().reverse().map((e) => [new Date(e.errorTime * 1000).toLocaleString(),
        logLink(e.errorWorkerLogLink, `${e.errorHost}:${e.errorPort}`), {html: esc(e.error), cls: "err"}]),
      {empty: "No errors reported."});
}

$("#window").addEventListener("change", () => refresh(false));
window.addEventListener("hashchange", route);
route();
