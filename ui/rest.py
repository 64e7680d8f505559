"""The UI's HTTP face: Storm's REST API v1 under ``/api/v1`` and the page under ``/``.

Every answer comes from Nimbus over gRPC (:class:`~squall.client.nimbus_client.NimbusClient`,
which follows the leader); nothing is cached here, so two UIs agree. Errors are JSON
``{"error", "errorMessage"}`` with an HTTP status from the one table :data:`HTTP_STATUS`
(Storm answers 500 for everything; a 404 for an unknown topology is what scripts want).
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any, Callable, Mapping

from flask import Flask, Response, jsonify, request, send_from_directory

from ..client import config as cfg
from ..client.errors import InvalidRequest, NimbusError, SquallError
from ..client.health import topology_health
from . import storm_json as sj
from .kafka_lag import topology_lag
from .redis_lag import stream_lag
from .spout_lag import new_deadline

log = logging.getLogger("squall.ui")

#: NimbusError.grpc_code -> HTTP status.
HTTP_STATUS = {"NOT_FOUND": 404, "ALREADY_EXISTS": 409, "INVALID_ARGUMENT": 400,
               "RESOURCE_EXHAUSTED": 429, "UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403,
               "FAILED_PRECONDITION": 409, "UNAVAILABLE": 503, "INTERNAL": 500}
STATUS_TEXT = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
               409: "Conflict", 429: "Too Many Requests", 500: "Internal Server Error",
               501: "Not Implemented", 503: "Service Unavailable"}

STATIC = os.path.join(os.path.dirname(__file__), "static")


def json_error(status: int, message: str) -> Response:
    """``{"error", "errorMessage"}`` with the HTTP status: how the web daemons refuse."""
    resp = jsonify({"error": STATUS_TEXT.get(status, str(status)), "errorMessage": message})
    resp.status_code = status
    return resp


def make_app(client: Any, conf: Mapping[str, Any], version: str,
             log_link: sj.LogLink, metrics: Any = None) -> Flask:
    """The WSGI app. ``client`` is a NimbusClient (or anything with its methods);
    ``log_link(topology_id, host, port)`` makes an executor's logviewer URL; ``metrics``
    (ui/server.py's UiMetrics) counts requests."""
    app = Flask("squall.ui", static_folder=None)
    app.json.sort_keys = False

    @app.errorhandler(NimbusError)
    def nimbus_error(e: NimbusError):
        return json_error(HTTP_STATUS.get(e.grpc_code, 500), str(e))

    @app.errorhandler(SquallError)
    def squall_error(e: SquallError):
        return json_error(400, str(e))

    @app.errorhandler(404)
    def not_found(e):
        return json_error(404, f"no such endpoint: {request.path} (see /api/v1 in the README)")

    @app.errorhandler(405)
    def bad_method(e):
        return json_error(405, f"{request.method} is not allowed on {request.path}")

    @app.errorhandler(Exception)
    def crash(e: Exception):
        log.exception("UI request %s %s failed", request.method, request.path)
        return json_error(500, f"{type(e).__name__} inside the UI; see the UI's log")

    if metrics is not None:
        @app.before_request
        def _start():
            request.environ["squall.t0"] = time.perf_counter()

        @app.after_request
        def _count(resp):
            t0 = request.environ.get("squall.t0")
            endpoint = request.url_rule.rule if request.url_rule else "unmatched"
            metrics.observe(request.method, endpoint, resp.status_code,
                            time.perf_counter() - t0 if t0 else 0.0)
            return resp

    def window() -> int:
        try:
            return sj.parse_window(request.args.get("window"))
        except ValueError as e:
            raise InvalidRequest(str(e)) from None

    def include_sys() -> bool:
        # Storm's ?sys=true (its UI's "Show System Stats"): the system streams' counts too.
        return request.args.get("sys", "").lower() in ("1", "true")

    def info(tid: str, secs: int = 0):
        return client.topology_info(topology_id=tid, window_secs=secs)

    def windows(tid: str, have: Mapping[int, Any]) -> dict[int, Any]:
        out = dict(have)
        for w in sj.WINDOWS:
            if w not in out:
                out[w] = info(tid, w)
        return out

    def topo_conf(tid: str) -> dict:
        return json.loads(client.topology_conf(tid))

    # --- pages ---
    @app.get("/")
    @app.get("/index.html")
    @app.get("/topology.html")
    def page():
        return send_from_directory(STATIC, "index.html")

    @app.get("/static/<path:name>")
    def static(name: str):
        return send_from_directory(STATIC, name)

    # --- cluster ---
    @app.get("/api/v1/cluster/configuration")
    def cluster_configuration():
        # The UI's own conf (its squall.yaml): the cluster's, as Storm's UI shows Nimbus's.
        return jsonify(cfg.redact({**cfg.defaults(), **conf}))

    @app.get("/api/v1/cluster/summary")
    def cluster_summary():
        return jsonify(sj.cluster_summary(client.list(), version))

    @app.get("/api/v1/supervisor/summary")
    def supervisor_summary():
        return jsonify(sj.supervisor_summary(client.list()))

    @app.get("/api/v1/nimbus/summary")
    def nimbus_summary():
        return jsonify(sj.nimbus_summary(client.list()))

    @app.get("/api/v1/topology/summary")
    def topology_summary():
        c = client.list()
        return jsonify({"topologies": [sj.topology_row(t, topology_health(t))
                                       for t in c.topologies],
                        "schedulerDisplayResource": False})

    # --- one topology ---
    @app.get("/api/v1/topology/<tid>")
    def topology(tid: str):
        secs = window()
        main = info(tid, secs)
        return jsonify(sj.topology_page(main, windows(tid, {secs: main}), secs,
                                        topo_conf(tid), log_link, include_sys=include_sys()))

    @app.get("/api/v1/topology/<tid>/component/<component>")
    def component(tid: str, component: str):
        secs = window()
        main = info(tid, secs)
        page = sj.component_page(main, component, secs, windows(tid, {secs: main}), log_link,
                                 include_sys=include_sys())
        if page is None:
            return json_error(404, f"topology {tid} has no component {component!r} "
                               f"(it has: {', '.join(c.component_id for c in main.components)})")
        return jsonify(page)

    @app.get("/api/v1/topology/<tid>/visualization")
    def visualization(tid: str):
        main = info(tid, window())
        return jsonify(sj.visualization(client.user_topology(tid), main))

    @app.get("/api/v1/topology/<tid>/lag")
    def lag(tid: str):
        main = info(tid)  # an unknown id is still a 404
        topology, tconf = client.user_topology(tid), topo_conf(tid)
        deadline = new_deadline()  # one for every source's reads together
        return jsonify({**topology_lag(topology, main.name, tconf, deadline),
                        **stream_lag(topology, main.name, tconf, deadline)})

    @app.get("/api/v1/topology-workers/<tid>")
    def topology_workers(tid: str):
        main = info(tid)
        hosts = sorted({(e.host, e.port) for e in main.executors if e.host})
        return jsonify({"hostPortList": [{"host": h, "port": p} for h, p in hosts],
                        "logviewerPort": cfg.get(conf, cfg.LOGVIEWER_PORT)})

    # --- actions (Storm's POST endpoints) ---
    def action(tid: str, op: str, fn: Callable[[str], None]):
        name = info(tid).name
        fn(name)
        log.info("UI: %s topology %s (%s)", op, name, tid)
        return jsonify({"topologyOperation": op, "topologyId": tid, "status": "success"})

    def wait_time(raw: str) -> int:
        try:
            secs = int(raw)
        except ValueError:
            raise InvalidRequest(f"wait time {raw!r} is not a whole number of seconds") \
                from None
        if not 0 <= secs <= cfg.MAX_WAIT_SECS:
            raise InvalidRequest(f"wait time must be 0..{cfg.MAX_WAIT_SECS} seconds, got "
                                 f"{secs}")
        return secs

    @app.post("/api/v1/topology/<tid>/activate")
    def activate(tid: str):
        return action(tid, "activate", client.activate)

    @app.post("/api/v1/topology/<tid>/deactivate")
    def deactivate(tid: str):
        return action(tid, "deactivate", client.deactivate)

    @app.post("/api/v1/topology/<tid>/kill/<wait>")
    def kill(tid: str, wait: str):
        secs = wait_time(wait)
        return action(tid, "kill", lambda name: client.kill(name, secs))

    @app.post("/api/v1/topology/<tid>/rebalance/<wait>")
    def rebalance(tid: str, wait: str):
        secs = wait_time(wait)
        body = request.get_json(silent=True) if request.data else {}
        if body is None or not isinstance(body, dict):
            raise InvalidRequest("the body must be JSON: {\"rebalanceOptions\": {\"numWorkers\""
                                 ": 2, \"executors\": {\"count\": 4}}}")
        opts = body.get("rebalanceOptions") or {}
        try:
            workers = opts.get("numWorkers")
            workers = None if workers in (None, "") else int(workers)
            executors = {str(k): int(v) for k, v in (opts.get("executors") or {}).items()}
        except (TypeError, ValueError, AttributeError):
            raise InvalidRequest("rebalanceOptions: numWorkers and each executors value must "
                                 "be whole numbers") from None
        return action(tid, "rebalance",
                      lambda name: client.rebalance(name, secs, workers, executors))

    # --- profiling and debugging (Storm's /profiling and /debug endpoints) ---
    # Storm answers GET here; a change is a POST in Squall (the page's X-Squall-Csrf header
    # guards them: a GET could be a link on another site).
    def worker_of(tid: str, host_port: str) -> tuple[str, str, int]:
        host, sep, port = host_port.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise InvalidRequest(f"worker {host_port[:80]!r}: give HOST:PORT")
        topology = info(tid)
        # Only the topology's own workers: the UI asks that host's logviewer with the
        # cluster's token, which must never go to an address a caller names.
        if (host, int(port)) not in {(ex.host, ex.port) for ex in topology.executors}:
            raise InvalidRequest(f"{host_port[:80]} is not a worker of {topology.name}")
        return topology.name, host, int(port)

    def profile(tid: str, action: str, host_port: str, secs: str | int | None = None):
        name, host, port = worker_of(tid, host_port)
        try:
            n = 0 if secs in (None, "") else int(secs)  # type: ignore[arg-type]
        except ValueError:
            raise InvalidRequest(f"seconds {str(secs)[:40]!r} is not a whole number") from None
        r = client.set_worker_profiler(name, f"{host}:{port}", action, n)
        log.info("UI: profiler %s of %s:%d of topology %s (request %s)", r.action, host, port,
                 name, r.id)
        out = {"status": "ok", "id": f"{host}:{port}", "requestId": r.id, "action": r.action,
               "secs": r.secs, "expires": r.expires_secs}
        if hasattr(log_link, "dumps"):
            out["dumpsLink"] = log_link.dumps(tid, host, port)  # type: ignore[attr-defined]
        return jsonify(out)

    @app.post("/api/v1/topology/<tid>/profiling/<action>/<host_port>")
    def profiling(tid: str, action: str, host_port: str):
        """dumpjstack (threads), dumpheap (memory, ?secs=N), stop; threads/memory/cpu too."""
        return profile(tid, action, host_port, request.args.get("secs"))

    @app.post("/api/v1/topology/<tid>/profiling/<action>/<host_port>/<secs>")
    def profiling_for(tid: str, action: str, host_port: str, secs: str):
        """start (cpu) for SECS seconds (Storm's timeout is minutes of a JVM recording; a
        sampling profile is seconds), or dumpheap after SECS."""
        return profile(tid, action, host_port, secs)

    @app.get("/api/v1/topology/<tid>/profiling/dumps/<host_port>")
    def profiling_dumps(tid: str, host_port: str):
        """The worker's dumps and logs, from its host's logviewer, with signed links."""
        _, host, port = worker_of(tid, host_port)
        lister = getattr(log_link, "list_dumps", None)
        if lister is None:
            return json_error(501, "this UI has no logviewer to ask")
        try:
            files = lister(tid, host, port)
        except SquallError as e:
            return json_error(503, str(e))
        return jsonify({"id": f"{host}:{port}", "files": files,
                        **sj._worker_links(log_link, tid, host, port)})

    @app.get("/api/v1/topology/<tid>/profiling/pending")
    def profiling_pending(tid: str):
        """Storm's pending profile actions, and profilerActive: the CPU profiles running."""
        found = client.pending_profile_actions(topology_id=tid)

        def row(r):
            host, _, port = r.worker.rpartition(":")
            return {"host": host, "port": int(port), "action": r.action, "secs": r.secs,
                    "requestId": r.id, "timestamp": int(r.time_secs * 1000),
                    "expires": r.expires_secs,
                    **({"dumplink": log_link.dumps(tid, host, int(port))}  # type: ignore
                       if hasattr(log_link, "dumps") else {})}
        return jsonify({"requests": [row(r) for r in found.requests],
                        "profilerActive": [row(r) for r in found.active]})

    def debug(tid: str, component: str, action: str, spct: str):
        if action not in ("enable", "disable"):
            raise InvalidRequest(f"debug action {action[:40]!r}: enable or disable")
        try:
            pct = float(spct)
        except ValueError:
            raise InvalidRequest(f"sampling percentage {spct[:40]!r} is not a number") \
                from None
        name = info(tid).name
        result = client.debug(name, component, action == "enable", pct)
        log.info("UI: debug %s %s of topology %s at %s%%", action, component or "(all)", name,
                 spct)
        return jsonify({"topologyOperation": "debug", "topologyId": tid, "status": "success",
                        "debug": {c: {"enable": o.enable, "samplingPct": o.sampling_pct}
                                  for c, o in result.component_debug.items()}})

    @app.post("/api/v1/topology/<tid>/debug/<action>/<spct>")
    def debug_topology(tid: str, action: str, spct: str):
        return debug(tid, "", action, spct)

    @app.post("/api/v1/topology/<tid>/component/<component>/debug/<action>/<spct>")
    def debug_component(tid: str, component: str, action: str, spct: str):
        return debug(tid, component, action, spct)

    @app.get("/api/v1/topology/<tid>/errors")
    def topology_errors(tid: str):
        main = info(tid)
        return jsonify({"errors": [{"component": e.component, "error": e.error,
                                    "errorTime": e.time_secs, "errorHost": e.host,
                                    "errorPort": e.port} for e in main.errors]})

    return app
