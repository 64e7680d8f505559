// Squall UI: the pages, plain JavaScript over the REST API v1 (no build step, nothing downloaded);
// the live charts are chart.js's, the topology graph graph.js's.
"use strict";

const POLL_MS = 3000;          // how often the open page refreshes
const $ = (sel) => document.querySelector(sel);
let timer = null;
let view = null;               // {kind, id, component}
let seq = 0;                   // the latest refresh; an older one that answers late is dropped

function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;",
    '"': "&quot;", "'": "&#39;"}[c]));
}
function num(n) { return Number(n || 0).toLocaleString("en-US"); }
function windowParam() { return $("#window").value; }
// Storm's ?sys=true, remembered across visits: the system streams' counts and components.
function sysParam() { return $("#sys").checked ? "&sys=true" : ""; }

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

// Tables sit in a box of their own that scrolls sideways if the page is too narrow for them.
function table(headers, rows, opts = {}) {
  const head = headers.map((h) => `<th class="${h.num ? "num" : ""}">${esc(h.label)}</th>`).join("");
  const body = rows.length ? rows.map((r) => "<tr>" + r.map((c, i) =>
    `<td class="${headers[i].num ? "num " : ""}${c && c.cls ? c.cls : ""}">${c && c.html !== undefined ? c.html : esc(c)}</td>`
  ).join("") + "</tr>").join("") : `<tr><td colspan="${headers.length}" class="muted">${esc(opts.empty || "none")}</td></tr>`;
  return `<div class="table-wrap"><table${opts.id ? ` id="${opts.id}"` : ""}><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table></div>`;
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
    if (current()) {
      const u = $("#updated");
      u.textContent = "updated " + new Date().toLocaleTimeString();
      u.dataset.refreshes = String(Number(u.dataset.refreshes || 0) + 1);  // for the browser tests
    }
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
  const sys = sysParam();
  const t = await api(`/api/v1/topology/${encodeURIComponent(id)}?window=${encodeURIComponent(w)}${sys}`);
  // Rates come from all-time counters, whatever window the tables show.
  const all = w === ":all-time" ? t : await api(`/api/v1/topology/${encodeURIComponent(id)}?window=:all-time${sys}`);
  if (!current()) return;
  Charts.record(id, all);
  $("#crumbs").innerHTML = `› <a href="#/topology/${encodeURIComponent(id)}">${esc(t.name)}</a>`;
  const restarts = t.recentRestarts ? `<span class="health-bad">workers restarting: ${t.recentRestarts} in ${t.restartWindowSeconds} s</span>` : "";
  const comps = [...t.spouts.map((s) => ({id: s.spoutId, kind: "spout"})), ...t.bolts.map((b) => ({id: b.boltId, kind: "bolt"}))];
  const tid = encodeURIComponent(id);
  const compLink = (c) => ({html: `<a href="#/topology/${tid}/component/${encodeURIComponent(c)}">${esc(c)}</a>`});
  const times = (comp, text) => (t.errorGroups.find((g) => g.component === comp && g.error === text) || {}).count;
  const err = (x, comp) => {
    if (!x.lastError) return "";
    const n = times(comp, x.lastError);
    return {html: `${esc(x.lastError)} <span class="muted">(${n > 1 ? `${n}×, last ` : ""}` +
      `${esc(x.errorHost)}:${esc(x.errorPort)}, ${esc(ago(x.errorLapsedSecs))})</span>`, cls: "err"};
  };
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
      `<button id="btn-debug" type="button">Debug: ${t.debug ? esc(t.samplingPct) + "%" : "off"}</button>` +
    `</div>` +
    `<h2>Topology stats</h2>` + table([{label: "Window"}, {label: "Emitted", num: 1},
      {label: "Transferred", num: 1}, {label: "Complete latency (ms)", num: 1},
      {label: "Acked", num: 1}, {label: "Failed", num: 1}],
      t.topologyStats.map((s) => [s.windowPretty, num(s.emitted), num(s.transferred),
        s.completeLatency, num(s.acked), num(s.failed)]), {id: "topology-stats"}) +
    `<h2>Throughput and latency <span class="muted">(live: a point each time new counts arrive)</span></h2>` +
    `<div class="charts">${comps.map((c) => Charts.box(c)).join("")}</div>` +
    `<h2>Spouts <span class="muted">(${esc(t.windowHint)})</span></h2>` + table([{label: "Id"},
      {label: "Executors", num: 1}, {label: "Tasks", num: 1}, {label: "Emitted", num: 1},
      {label: "Transferred", num: 1}, {label: "Complete latency (ms)", num: 1},
      {label: "p99 (ms)", num: 1}, {label: "Acked", num: 1}, {label: "Failed", num: 1},
      {label: "Last error"}],
      t.spouts.map((s) => [compLink(s.spoutId), s.executors, s.tasks, num(s.emitted),
        num(s.transferred), s.completeLatency, s.completeLatencyP99, num(s.acked), num(s.failed), err(s, s.spoutId)]),
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
        b.executeLatency, num(b.executed), b.processLatency, num(b.acked), num(b.failed), err(b, b.boltId)]),
      {id: "bolts"}) +
    `<h2>Topology graph</h2><div class="graph" id="graph"></div>` +
    `<h2>Workers</h2>` + table([{label: "Host"}, {label: "Port", num: 1}, {label: "Executors", num: 1},
      {label: "Components"}, {label: "Uptime"}, {label: "Log"}, {label: "Dumps and events"}],
      t.workers.map((wk) => [wk.host, wk.port, wk.executorsTotal,
        Object.entries(wk.componentNumTasks).map(([c, n]) => `${c} (${n})`).join(", "),
        wk.uptime, logLink(wk.workerLogLink, `${wk.host}:${wk.port}`), workerLinks(wk)]), {id: "workers"}) +
    `<h2>Errors <span class="muted">(the same error of a component once, with how often)</span></h2>` +
      errorTable(t.errorGroups, true);
  $("#main").innerHTML = html;
  Charts.drawAll(id, comps);
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
  Graph.draw($("#graph"), vis);
}

function ago(secs) {
  secs = Number(secs) || 0;
  if (secs < 90) return `${secs} s ago`;
  if (secs < 5400) return `${Math.round(secs / 60)} min ago`;
  return `${Math.round(secs / 3600)} h ago`;
}

// Grouped errors (REST errorGroups): one row per component and error text.
function errorTable(groups, withComponent) {
  const when = (s) => new Date(s * 1000).toLocaleString();
  return table([{label: "Last time"}, ...(withComponent ? [{label: "Component"}] : []),
    {label: "Times", num: 1}, {label: "Error"}, {label: "Last where"}, {label: "First time"}],
    groups.map((g) => [when(g.lastTime), ...(withComponent ? [g.component] : []),
      {html: `${num(g.count)}${g.olderDropped ? "+" : ""}`,
       cls: g.count > 1 ? "times" : ""},
      {html: esc(g.error), cls: "err"},
      logLink(g.errorWorkerLogLink, `${g.errorHost}:${g.errorPort}`),
      g.count > 1 ? when(g.firstTime) : ""]),
    {id: "errors", empty: "No errors reported."});
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
  $("#btn-debug").onclick = () => askDebug(t.name, t.debug ? t.samplingPct : 10,
    (pct) => post(pct > 0 ? `debug/enable/${pct}` : "debug/disable/0", null, `Debug ${t.name}`));
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
  const c = await api(`/api/v1/topology/${encodeURIComponent(id)}/component/${encodeURIComponent(comp)}?window=${encodeURIComponent(windowParam())}${sysParam()}`);
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
    batchTable(c) +
    profilingHtml(id, comp, c) +
    `<h2>Errors</h2>` + errorTable(c.componentErrorGroups, false);
}

// ---- profiling and debugging (squall profile, squall debug) -------------------------------
// Each worker's dumps come from its host's logviewer through the UI (/profiling/dumps), at
// most every DUMPS_MS per worker, and soon after a request.
const DUMPS_MS = 10000;
const dumpsCache = {};     // "topology id|host:port" -> {t, v, err}
let cpuSecs = 10;          // the last CPU profile length asked for

function workerLinks(w) {
  const links = [];
  if (w.dumpsLink) links.push(`<a href="${esc(w.dumpsLink)}" target="_blank">files</a>`);
  if (w.eventLogLink) links.push(`<a href="${esc(w.eventLogLink)}" target="_blank">events</a>`);
  return {html: links.join(" · ")};
}

function askDebug(what, pct, done) {
  ask(`Debug ${what}`, "Sample this percentage of the tuples emitted into each worker's events log (the logviewer shows them); 0 stops.",
    [{id: "pct", label: "Sampling (%)", value: pct}], "Apply").then((v) => {
    if (!v) return;
    const n = Number(v.pct);
    if (!(n >= 0 && n <= 100)) { toast("the sampling percentage is 0 to 100", true); return; }
    done(n);
  });
}

function dumpsHtml(entry) {
  if (!entry) return `<span class="muted">…</span>`;
  if (entry.err) return `<span class="muted">${esc(entry.err)}</span>`;
  const files = entry.v.filter((f) => f.kind !== "log" && f.kind !== "events").slice(0, 8);
  if (!files.length) return `<span class="muted">none yet</span>`;
  return files.map((f) => `<a href="${esc(f.link)}" target="_blank" title="${esc(f.name)}">${esc(f.kind)}` +
    `${f.name.endsWith(".collapsed") ? " (folded)" : ""} ${esc(new Date(f.mtime * 1000).toLocaleTimeString())}</a>`).join("<br>");
}

async function loadDumps(id, hp, force) {
  const key = `${id}|${hp}`;
  const c = dumpsCache[key];
  if (!force && c && Date.now() - c.t < DUMPS_MS) return;
  dumpsCache[key] = {t: Date.now(), v: c ? c.v : [], err: c ? c.err : null};
  try {
    const r = await api(`/api/v1/topology/${encodeURIComponent(id)}/profiling/dumps/${encodeURIComponent(hp)}`);
    dumpsCache[key] = {t: Date.now(), v: r.files, err: null};
  } catch (e) {
    dumpsCache[key] = {t: Date.now(), v: [], err: String(e.message || e)};
  }
  const cell = document.querySelector(`.dumps[data-hp="${CSS.escape(hp)}"]`);
  if (cell && view.id === id) cell.innerHTML = dumpsHtml(dumpsCache[key]);
}

function profilingHtml(id, comp, c) {
  const seen = new Map();
  for (const e of c.executorStats) if (!seen.has(`${e.host}:${e.port}`)) seen.set(`${e.host}:${e.port}`, e);
  const rows = [...seen.entries()].map(([hp, e]) => [hp,
    {html: `<button type="button" data-prof="threads" data-hp="${esc(hp)}">Thread dump</button> ` +
      `<button type="button" data-prof="memory" data-hp="${esc(hp)}">Memory</button> ` +
      `<button type="button" data-prof="cpu" data-hp="${esc(hp)}">CPU profile (${cpuSecs} s)</button>`},
    {html: `<span class="dumps" data-hp="${esc(hp)}">${dumpsHtml(dumpsCache[`${id}|${hp}`])}</span>`},
    workerLinks(e)]);
  setTimeout(() => wireProfiling(id, comp, c, [...seen.keys()]), 0);
  return `<h2>Profiling and debugging</h2>` +
    `<div class="actions"><button id="btn-debug" type="button">Debug ${esc(comp)}: ${c.debug ? esc(c.samplingPct) + "%" : "off"}</button></div>` +
    table([{label: "Worker"}, {label: "Take"}, {label: "Dumps (newest first)"}, {label: "All"}], rows,
      {id: "profiling", empty: "No workers."});
}

function wireProfiling(id, comp, c, hps) {
  const tid = encodeURIComponent(id);
  const debugBtn = $("#btn-debug");
  if (!debugBtn) return;  // the page moved on
  debugBtn.onclick = () => askDebug(comp, c.debug ? c.samplingPct : 10, async (pct) => {
    try {
      await api(`/api/v1/topology/${tid}/component/${encodeURIComponent(comp)}/debug/${pct > 0 ? "enable" : "disable"}/${pct}`,
        {method: "POST"});
      toast(`Debug ${comp}: ${pct > 0 ? pct + "% sampled" : "off"}`);
      refresh(false);
    } catch (e) { toast(`Debug ${comp} failed: ${e.message}`, true); }
  });
  for (const b of document.querySelectorAll("button[data-prof]")) {
    b.onclick = async () => {
      const action = b.dataset.prof, hp = b.dataset.hp;
      let secs = 0;
      if (action === "cpu") {
        const v = await ask(`CPU profile of ${hp}`, "Samples every thread's stack every 10 ms for this long, then writes a flame graph.",
          [{id: "secs", label: "Seconds", value: cpuSecs}], "Profile");
        if (!v) return;
        secs = cpuSecs = Math.max(1, Math.min(600, Number(v.secs) || 10));
      }
      try {
        const r = await api(`/api/v1/topology/${tid}/profiling/${action}/${encodeURIComponent(hp)}${secs ? "/" + secs : ""}`,
          {method: "POST"});
        toast(`${action} of ${hp} requested (${r.requestId}); its file is listed here when written`);
        const wait = (r.secs || 0) * 1000;
        for (const ms of [2000, 5000, wait + 3000, wait + 8000]) setTimeout(() => loadDumps(id, hp, true), ms);
      } catch (e) { toast(`${action} of ${hp} failed: ${e.message}`, true); }
    };
  }
  for (const hp of hps) loadDumps(id, hp, false);  // not awaited: a slow logviewer must not hold the page
}

// A component that works in batches (the Spark bridge): each executor's latest batch, as
// Spark's Structured Streaming shows a query's progress, and the component's total.
function batchTable(c) {
  if (!c.batchProgress) return "";
  const ms = (n) => `${num(n)}`;
  const row = (id, p) => [id, num(p.batchId), p.timestamp.replace("T", " ").replace(/\.\d+Z$/, "Z"),
    num(p.numInputRows), num(Math.round(p.inputRowsPerSecond)), num(Math.round(p.processedRowsPerSecond)),
    ms(p.durationMs.triggerExecution), ms(p.durationMs.conversion), ms(p.durationMs.addBatch),
    num(p.batches), num(p.rows), num(p.failedBatches)];
  const headers = [{label: "Id"}, {label: "Batch", num: 1}, {label: "Finished"}, {label: "Rows", num: 1},
    {label: "Input rows/s", num: 1}, {label: "Processed rows/s", num: 1}, {label: "Duration (ms)", num: 1},
    {label: "Conversion (ms)", num: 1}, {label: "fn (ms)", num: 1}, {label: "Batches", num: 1},
    {label: "Total rows", num: 1}, {label: "Failed batches", num: 1}];
  const rows = c.executorStats.filter((e) => e.batchProgress).map((e) => row(e.id, e.batchProgress));
  rows.push(row("all", c.batchProgress));
  return `<h2>Batches <span class="muted">latest per executor</span></h2>` + table(headers, rows, {id: "batches"});
}

$("#window").addEventListener("change", () => refresh(false));
$("#sys").checked = localStorage.getItem("squall.sys") === "1";
$("#sys").addEventListener("change", () => {
  localStorage.setItem("squall.sys", $("#sys").checked ? "1" : "0");
  refresh(true);  // the graph too: system components come and go with it
});
window.addEventListener("hashchange", route);
route();
