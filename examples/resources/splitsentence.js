// Split sentences into words: the same bolt as splitsentence.py, in Node.js (no packages).
// Storm's multi-lang protocol over stdin/stdout: JSON lines, each message ended by "end".
"use strict";
const fs = require("fs");
const path = require("path");

let buffered = "";
let setupDone = false;
const out = [];

function send(msg) { out.push(JSON.stringify(msg) + "\nend\n"); }
function flush() { if (out.length) { process.stdout.write(out.join("")); out.length = 0; } }

function handle(msg) {
  if (!setupDone) {
    setupDone = true;
    send({pid: process.pid});
    fs.closeSync(fs.openSync(path.join(msg.pidDir, String(process.pid)), "w"));
    return;
  }
  if (Array.isArray(msg)) return;  // task ids: never asked for
  if (msg.stream === "__heartbeat") { send({command: "sync"}); return; }
  for (const word of msg.tuple[0].split(" ")) {
    send({command: "emit", anchors: [msg.id], tuple: [word], need_task_ids: false});
  }
  send({command: "ack", id: msg.id});
}

process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buffered += chunk;
  let end;
  while ((end = buffered.indexOf("\nend\n")) >= 0) {
    handle(JSON.parse(buffered.slice(0, end)));
    buffered = buffered.slice(end + 5);
  }
  flush();
});
process.stdin.on("end", () => process.exit(0));
