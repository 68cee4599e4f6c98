"""Headless Chromium for the page tests, driven over the DevTools protocol
on a pipe (`--remote-debugging-pipe`: JSON messages ending in a NUL byte,
commands on fd 3, answers and events on fd 4), so no WebSocket client or
driver is needed.

The browser gets a fresh profile, no background networking, and a host
resolver that resolves nothing but 127.0.0.1: a page can load file:// and
the test's own local server, nothing else.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Page:
    errors: list[str] = field(default_factory=list)     # console errors, exceptions, failed loads
    result: object = None                                # what `evaluate` returned
    screenshot: bytes = b""                              # PNG


class Browser:
    def __init__(self, width: int = 1200, height: int = 900):
        if CHROMIUM is None:
            raise RuntimeError("chromium is not installed: `make system-deps` installs it "
                               "(apt-get install chromium)")
        self.profile = tempfile.mkdtemp(prefix="kchaos-chromium-")
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()

        def fds():              # the child's fd 3 reads commands, fd 4 writes answers
            commands, answers = os.dup(to_browser), os.dup(from_browser)   # neither is 3 or 4
            os.dup2(commands, 3)
            os.dup2(answers, 4)
        self.process = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-extensions", "--disable-sync",
             "--disable-component-update", "--disable-default-apps", "--mute-audio",
             "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
             f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
             "--remote-debugging-pipe", "about:blank"],
            # subprocess closes all but pass_fds after preexec_fn runs.
            pass_fds=(3, 4), preexec_fn=fds,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next = 0
        self.events: list[dict] = []

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except Exception:  # noqa: BLE001 — killed below anyway
            pass
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._write, self._read):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the protocol ---------------------------------------------------------

    def call(self, method: str, session: str | None = None, timeout: float = 30, **params):
        self._next += 1
        message = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        while True:
            event = self._receive(deadline)
            if event.get("method") == method:
                return event
            self.events.append(event)

    def _receive(self, deadline: float) -> dict:
        import select
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its pipe (did it crash?)")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    # -- what the tests do ------------------------------------------------------

    def visit(self, url: str, expression: str = "null", full_page: bool = False) -> Page:
        """Load url; the errors the page logged, what `expression` evaluates
        to once loaded, and a screenshot."""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session)
        self.events.clear()
        self.call("Page.navigate", session, url=url)
        self.wait_for("Page.loadEventFired")
        time.sleep(0.3)          # late console messages and image decodes
        page = Page()
        value = self.call("Runtime.evaluate", session, expression=expression,
                          returnByValue=True)
        page.result = value.get("result", {}).get("value")
        self.call("Runtime.evaluate", session, expression="0")     # flush pending events
        for event in self.events:
            params = event.get("params", {})
            if event.get("method") == "Runtime.consoleAPICalled" and params.get("type") in (
                    "error", "assert"):
                page.errors.append(" ".join(str(a.get("value", a.get("description")))
                                            for a in params.get("args", [])))
            elif event.get("method") == "Runtime.exceptionThrown":
                page.errors.append(params.get("exceptionDetails", {}).get("text", "exception"))
            elif event.get("method") == "Log.entryAdded" and params.get("entry", {}).get(
                    "level") == "error":
                entry = params["entry"]
                page.errors.append(f"{entry.get('text')} {entry.get('url', '')}".strip())
        shot = self.call("Page.captureScreenshot", session, format="png",
                         captureBeyondViewport=full_page)
        page.screenshot = base64.b64decode(shot["data"])
        self.call("Target.closeTarget", targetId=target)
        return page
