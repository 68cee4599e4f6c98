"""`kchaos serve`: the listing, reports and files, zips, what it refuses,
and runs that are still going or crashed; over real HTTP on 127.0.0.1."""

from __future__ import annotations

import http.client
import io
import json
import os
import signal
import subprocess
import sys
import time
import zipfile

import pytest

from history_analysis.report import write_report
from kchaos.serve import serve_in_thread
from tests.history_analysis.report.report_runs import clean, write_run


def results(run_dir, valid, counts=None):
    (run_dir / "results.json").write_text(json.dumps({"valid": valid, "counts": counts or {}}))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = tmp_path_factory.mktemp("store")
    good = write_run(store / "queue" / "20261125T100000", clean())
    results(good, True)
    write_report(good)
    bad = write_run(store / "queue" / "20261125T110000", clean())
    results(bad, False, {"lost-write": 3, "duplicate": 1})
    shaky = write_run(store / "other" / "20261125T120000", clean())
    results(shaky, "unknown")
    # Still running: a history, no results; crashed early: a broken test.json.
    going = store / "queue" / "20261125T130000"
    going.mkdir()
    (going / "history.jsonl").write_text('{"index": 0, "time": 1')
    crashed = store / "queue" / "20261125T140000"
    crashed.mkdir()
    (crashed / "test.json").write_text("{not json")
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_text("not for the store's visitors")
    os.symlink(outside, store / "queue" / "escape")
    os.symlink(outside / "secret.txt", good / "secret.txt")
    return store


@pytest.fixture(scope="module")
def server(store):
    server = serve_in_thread(store)
    yield server
    server.shutdown()
    server.server_close()


def get(server, path: str) -> tuple[int, bytes, dict]:
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(host, port, timeout=10)
    try:
        connection.request("GET", path)     # sent as is: no client-side normalising
        response = connection.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        connection.close()


def test_it_binds_loopback_by_default(server):
    assert server.server_address[0] == "127.0.0.1"


def test_the_listing_shows_every_run_with_its_verdict(server):
    status, body, headers = get(server, "/")
    page = body.decode()
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "5 of 5 runs" in page
    assert ('<a href="/runs/queue/20261125T100000/report.html">queue/20261125T100000</a>'
            in page)
    assert '<td class="valid">valid</td>' in page
    assert '<td class="invalid">invalid</td><td>duplicate 1, lost-write 3</td>' in page
    assert '<td class="unknown">unknown</td>' in page
    # No results.json (running or crashed): listed as unchecked, nothing failed.
    assert page.count('<td class="unchecked">unchecked</td>') == 2
    assert "queue/20261125T140000" in page and "queue/20261125T130000" in page


def test_the_listing_filters_by_verdict_and_sorts(server):
    page = get(server, "/?verdict=invalid")[1].decode()
    assert "1 of 5 runs" in page and "20261125T110000" in page
    assert "20261125T100000" not in page
    rows = get(server, "/?sort=anomalies&order=desc")[1].decode().split("<tr>")[2:]
    assert "20261125T110000" in rows[0]                 # 4 anomalies first
    rows = get(server, "/?sort=run&order=asc")[1].decode().split("<tr>")[2:]
    assert "other/20261125T120000" in rows[0]


def test_reports_and_files_are_served(server, store):
    status, body, headers = get(server, "/runs/queue/20261125T100000/report.html")
    assert status == 200 and b'class="verdict v-valid"' in body
    status, body, headers = get(server, "/runs/queue/20261125T100000/plots/latency.png")
    assert status == 200 and headers["Content-Type"] == "image/png"
    assert body.startswith(b"\x89PNG")
    status, body, headers = get(server, "/runs/queue/20261125T100000/history.jsonl")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert get(server, "/runs/queue/20261125T100000")[0] == 301
    status, body, _ = get(server, "/runs/queue/20261125T100000/")
    assert status == 200 and b'href="report.html"' in body
    assert get(server, "/runs/queue/nope/report.html")[0] == 404


def test_a_run_downloads_as_a_zip(server, store):
    status, body, headers = get(server, "/zip/queue/20261125T100000")
    assert status == 200 and headers["Content-Type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(body)).namelist()
    assert "20261125T100000/report.html" in names
    assert "20261125T100000/plots/latency.png" in names
    assert "20261125T100000/secret.txt" not in names     # a symlink is not followed


@pytest.mark.parametrize("path", [
    "/runs/../outside/secret.txt",
    "/runs/queue/../../secret.txt",
    "/runs/%2e%2e/secret.txt",
    "/runs/queue/%2E%2E/%2E%2E/etc/passwd",
    "/runs//etc/passwd",
    "/runs/%2Fetc%2Fpasswd",
    "/runs/queue/escape/secret.txt",                    # a symlinked directory out
    "/runs/queue/20261125T100000/secret.txt",           # a symlinked file out
    "/zip/queue/escape",
    "/zip/..",
])
def test_paths_outside_the_store_are_refused(server, path):
    status, body, _ = get(server, path)
    assert status == 403, (path, status, body)
    assert b"not for the store" not in body


def test_kchaos_serve_starts_lists_and_stops(store, tmp_path):
    process = subprocess.Popen([sys.executable, "-m", "cli", "serve", "--store", str(store),
                                "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith(f"serving {store} at http://127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/")
        assert connection.getresponse().status == 200
        connection.close()
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(10)
    missing = subprocess.run([sys.executable, "-m", "cli", "serve", "--store",
                              str(tmp_path / "nowhere")], capture_output=True, text=True,
                             timeout=60)
    assert missing.returncode == 3
    assert "no such directory" in missing.stderr and "--store" in missing.stderr


def test_the_listing_reads_a_changed_run_again(server, store):
    run_dir = store / "other" / "20261125T120000"
    assert '<td class="unknown">unknown</td>' in get(server, "/")[1].decode()
    time.sleep(0.01)
    results(run_dir, True)
    page = get(server, "/?verdict=valid")[1].decode()
    assert "other/20261125T120000" in page
    results(run_dir, "unknown")


def test_run_directories_are_found_at_any_depth_and_an_empty_store_says_why(tmp_path):
    """A folder of run directories (as `kchaos check` takes them), deeper
    ones, and a folder with none, which says what was looked for."""
    from kchaos.serve import run_dirs
    flat = write_run(tmp_path / "runs" / "first", clean())
    deep = write_run(tmp_path / "runs" / "ci" / "2026" / "11" / "nightly", clean())
    (flat / "nodes" / "n1").mkdir(parents=True)     # a run's own folders are not runs
    (flat / "nodes" / "n1" / "test.json").write_text("{}")
    assert run_dirs(tmp_path / "runs") == [deep, flat]
    (tmp_path / "empty").mkdir()
    server, empty = serve_in_thread(tmp_path / "runs"), serve_in_thread(tmp_path / "empty")
    try:
        status, body, _ = get(server, "/")
        assert status == 200 and "2 of 2 runs" in body.decode()
        assert "ci/2026/11/nightly" in body.decode()
        status, body, _ = get(empty, "/")
        assert status == 200 and "No run directory here: looked for folders holding a " \
            "<code>test.json</code> or a <code>history.jsonl</code>" in body.decode()
    finally:
        for each in (server, empty):
            each.shutdown()
            each.server_close()
