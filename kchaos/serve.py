"""`kchaos serve`: browse a store of runs in a web browser.

A small server on the standard library's `http.server`, bound to
127.0.0.1 unless told otherwise. `/` lists the runs (name, start, verdict,
anomaly counts, duration), sortable by any column and filtered by verdict
through the query string (no script in the page). `/runs/<run>/...` serves
the files of a run directory (its report, plots, history, results),
`/zip/<run>` a zip of it. Only paths inside the store are served: `..`,
absolute paths and symlinks that lead out are refused (403).

The listing reads two small files per run and keeps what it read until
their modification times change (`Listing`), so a store of a thousand
runs lists in well under a second (benchmarks/serve_listing.py).
"""

from __future__ import annotations

import io
import json
import mimetypes
import os
import threading
import zipfile
from dataclasses import dataclass
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from history_analysis.report.page import VERDICT_COLOURS, document
from history_analysis.run_dir import HISTORY_FILE, REPORT_FILE, RESULTS_FILE, TEST_FILE

VERDICTS = ("valid", "invalid", "unknown", "unchecked")
COLUMNS = ("run", "started", "verdict", "anomalies", "seconds")


@dataclass(frozen=True)
class RunSummary:
    run: str                    # path relative to the store, '/'-separated
    started: str
    verdict: str                # one of VERDICTS
    counts: dict
    seconds: float | None
    has_report: bool


def _verdict(valid) -> str:
    return {True: "valid", False: "invalid"}.get(valid, "unknown")


def summarise(store: Path, run_dir: Path) -> RunSummary:
    """What the listing shows of one run; a missing or unreadable file
    (a run still going, or one that crashed) shows as `unchecked`."""
    test = _read_json(run_dir / TEST_FILE) or {}
    results = _read_json(run_dir / RESULTS_FILE)
    outcome = test.get("outcome") or {}
    return RunSummary(
        run=run_dir.relative_to(store).as_posix(),
        started=str(test.get("start_wall_time") or run_dir.name),
        verdict="unchecked" if results is None else _verdict(results.get("valid")),
        counts=dict((results or {}).get("counts") or {}),
        seconds=outcome.get("seconds"),
        has_report=(run_dir / REPORT_FILE).is_file())


def _read_json(path: Path) -> dict | None:
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


MAX_DEPTH = 6      # directories below the store a run directory may be found at


def run_dirs(store: Path) -> list[Path]:
    """Directories under store holding a test.json or a history, at any
    depth up to MAX_DEPTH: `kchaos run`'s STORE/<test>/<run>/, a folder of
    run directories as `kchaos check` takes them, the store itself. A run
    directory's own subfolders (its tables, its nodes' logs) are not
    searched: nothing in them is a run."""
    found = []

    def visit(directory: Path, depth: int) -> None:
        if any((directory / name).is_file() for name in (TEST_FILE, HISTORY_FILE)):
            found.append(directory)
            return
        if depth == MAX_DEPTH:
            return
        try:
            children = sorted(p for p in directory.iterdir()
                              if p.is_dir() and not p.is_symlink() and not p.name.startswith("."))
        except OSError:
            return
        for child in children:
            visit(child, depth + 1)
    visit(store, 0)
    return found


class Listing:
    """Run summaries, re-read only for runs whose files changed."""

    def __init__(self, store: Path):
        self.store = store
        self._cache: dict[Path, tuple[tuple, RunSummary]] = {}
        self._lock = threading.Lock()

    def runs(self) -> list[RunSummary]:
        out = []
        with self._lock:
            for run_dir in run_dirs(self.store):
                stamp = tuple(_mtime(run_dir / n) for n in (TEST_FILE, RESULTS_FILE, REPORT_FILE))
                cached = self._cache.get(run_dir)
                if cached is None or cached[0] != stamp:
                    cached = (stamp, summarise(self.store, run_dir))
                    self._cache[run_dir] = cached
                out.append(cached[1])
        return out


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def inside(store: Path, relative: str) -> Path | None:
    """The path `relative` names inside the store, or None when it is
    absolute, climbs out with `..`, or resolves (through symlinks) outside."""
    if relative.startswith("/") or "\\" in relative or "\x00" in relative:
        return None
    parts = [p for p in relative.split("/") if p not in ("", ".")]
    if ".." in parts:
        return None
    root = store.resolve()
    path = (root / Path(*parts)).resolve() if parts else root
    return path if path == root or root in path.parents else None


# -- pages ----------------------------------------------------------------

STYLE = """body{font:14px system-ui,sans-serif;margin:1em 2em}table{border-collapse:collapse}
td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left}th{background:#f4f4f4}
a{color:#1a55a0}""" + "".join(f".{v}{{color:{c};font-weight:bold}}"
                              for v, c in VERDICT_COLOURS.items())


def listing_page(runs: list[RunSummary], query: dict[str, list[str]]) -> str:
    verdict = (query.get("verdict") or [""])[0]
    sort = (query.get("sort") or ["started"])[0]
    order = (query.get("order") or ["desc"])[0]
    shown = [r for r in runs if not verdict or r.verdict == verdict]
    keys = {"run": lambda r: r.run, "started": lambda r: r.started,
            "verdict": lambda r: VERDICTS.index(r.verdict),
            "anomalies": lambda r: sum(r.counts.values()),
            "seconds": lambda r: r.seconds if r.seconds is not None else -1.0}
    shown.sort(key=keys.get(sort, keys["started"]), reverse=order == "desc")

    def link(**change) -> str:
        params = {"verdict": verdict, "sort": sort, "order": order, **change}
        return "/?" + "&amp;".join(f"{k}={quote(str(v))}" for k, v in params.items() if v)
    heads = "".join(
        f'<th><a href="{link(sort=c, order="asc" if sort == c and order == "desc" else "desc")}">'
        f"{c}{(' ▼' if order == 'desc' else ' ▲') if sort == c else ''}</a></th>"
        for c in COLUMNS) + "<th>files</th>"
    filters = " · ".join(f'<a href="{link(verdict=v)}">{v}</a>' for v in VERDICTS)
    rows = []
    for r in shown:
        base = "/runs/" + quote(r.run) + "/"
        name = (f'<a href="{base}{REPORT_FILE}">{escape(r.run)}</a>' if r.has_report
                else escape(r.run))
        counts = ", ".join(f"{escape(t)} {n}" for t, n in sorted(r.counts.items())) or "—"
        seconds = "—" if r.seconds is None else f"{r.seconds:.0f}"
        rows.append(f"<tr><td>{name}</td><td>{escape(r.started)}</td>"
                    f'<td class="{r.verdict}">{r.verdict}</td><td>{counts}</td>'
                    f'<td>{seconds}</td><td><a href="{base}">files</a> · '
                    f'<a href="/zip/{quote(r.run)}">zip</a></td></tr>')
    if not runs:
        return document("kchaos runs", [
            "<h1>kchaos runs</h1><p>No run directory here: looked for folders holding a "
            f"<code>{TEST_FILE}</code> or a <code>{HISTORY_FILE}</code> under the store, "
            f"{MAX_DEPTH} levels deep at most. Point <code>kchaos serve --store</code> at "
            "the folder your runs are in (<code>kchaos run --store</code>, ./store by "
            "default).</p>"], style=STYLE)
    return document("kchaos runs", [
        "<h1>kchaos runs</h1>"
        f"<p>{len(shown)} of {len(runs)} runs · verdict: {filters} · "
        f'<a href="{link(verdict="")}">all</a></p>'
        f"<table><tr>{heads}</tr>{''.join(rows)}</table>"], style=STYLE)


def directory_page(store: Path, path: Path) -> str:
    relative = path.relative_to(store.resolve()).as_posix()
    items = "".join(
        f'<li><a href="{quote(p.name)}{"/" if p.is_dir() else ""}">{escape(p.name)}'
        f'{"/" if p.is_dir() else ""}</a></li>' for p in sorted(path.iterdir()))
    return document(relative, [f'<p><a href="/">all runs</a></p><h1>{escape(relative)}</h1>'
                               f"<ul>{items}</ul>"], style=STYLE)


def zip_of(path: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(path.rglob("*")):
            if file.is_file() and not file.is_symlink():
                archive.write(file, Path(path.name) / file.relative_to(path))
    return buffer.getvalue()


class Handler(BaseHTTPRequestHandler):
    server: "StoreServer"

    def do_GET(self) -> None:  # noqa: N802 — http.server's name
        url = urlsplit(self.path)
        route, _, rest = url.path.lstrip("/").partition("/")
        store = self.server.store
        if url.path == "/":
            return self._send(200, listing_page(self.server.listing.runs(), parse_qs(url.query)))
        if route not in ("runs", "zip"):
            return self._send(404, "not found")
        path = inside(store, unquote(rest))
        if path is None:
            return self._send(403, "refused: the path leads outside the store")
        if not path.exists():
            return self._send(404, "not found")
        if route == "zip":
            if not path.is_dir():
                return self._send(404, "not a run directory")
            return self._send(200, zip_of(path), "application/zip",
                              {"Content-Disposition": f'attachment; filename="{path.name}.zip"'})
        if path.is_dir():
            if not url.path.endswith("/"):
                return self._send(301, "", headers={"Location": url.path + "/"})
            return self._send(200, directory_page(store, path))
        kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if path.suffix in (".jsonl", ".log", ".json", ".md", ".txt"):
            kind = "text/plain; charset=utf-8"
        return self._send(200, path.read_bytes(), kind)

    def _send(self, status: int, body, kind: str = "text/html; charset=utf-8",
              headers: dict | None = None) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", kind if status == 200 else "text/html; charset=utf-8"
                         if status == 301 else "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Content-Type-Options", "nosniff")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 — http.server's name
        if self.server.verbose:
            super().log_message(format, *args)


class StoreServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, store: Path, host: str = "127.0.0.1", port: int = 8080,
                 verbose: bool = False):
        self.store = Path(store)
        self.listing = Listing(self.store)
        self.verbose = verbose
        super().__init__((host, port), Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"


def serve_in_thread(store: Path, host: str = "127.0.0.1", port: int = 0) -> StoreServer:
    """A server on a free port (port 0), serving in a daemon thread; call
    `shutdown()` to stop it. For tests and embedding."""
    server = StoreServer(store, host, port)
    threading.Thread(target=server.serve_forever, name="kchaos-serve", daemon=True).start()
    return server


def check_store(store: Path) -> None:
    if not store.is_dir():
        raise ValueError(f"--store {os.fspath(store)}: no such directory; pass the directory "
                         "your runs are in (kchaos run --store, default ./store)")
