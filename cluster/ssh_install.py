"""Installing kchaos onto ssh hosts, for the reference broker and the disk
gate (`node.python -m reference_broker`, `-m nemesis.disk`).

`install_kchaos(nodes)`:

1. asks each host's `python3` what it is (implementation, version,
   machine, C library);
2. builds here the kchaos wheel (`pip wheel --no-deps`, from a copy of the
   sources, so the work tree gets no build/ directory) and, for each kind
   of host, downloads the wheels of what a node imports — kio (which
   brings crc32c) and mfusepy, pinned by pyproject.toml
   (cluster.docker_image.node_requirements), nothing of Spark — and pip's
   own wheel, for that host's Python and platform;
3. on each host, all at once: uploads them over SFTP to
   `<workdir>/install/wheels/`, makes a venv `<workdir>/install/venv` with
   `python3 -m venv --without-pip` (so Debian's python3-venv is not
   needed) and installs into it offline with pip run from its wheel
   (`--no-index --find-links`); the kchaos wheel with `--no-deps`, its
   other dependencies being the harness's, not the node's;
4. sets `node.python` to the venv's python.

`<workdir>/install/installed` holds a digest of what was installed (the
kchaos wheel's RECORD, which lists every file's hash, the dependency
wheels' names and the host's Python); a host that has the same digest is
skipped. The wheels come from the package index pip is configured with
here (pip.conf, PIP_INDEX_URL, PIP_FIND_LINKS); the hosts need no network.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cluster.wheelhouse import Target, WheelhouseError, build_wheel, download, node_requirements
from cluster.node import CommandError, Node, SetupError

log = logging.getLogger("cluster")

INSTALL = "install"          # under node.workdir
MARKER = "installed"
MIN_PYTHON = (3, 11)         # pyproject.toml's requires-python
_PROBE = ("import json, platform, sys; print(json.dumps({"
          "'implementation': sys.implementation.name, 'version': sys.version_info[:2], "
          "'machine': platform.machine(), 'libc': platform.libc_ver()}))")


class InstallError(SetupError, RuntimeError):
    """kchaos could not be installed on a host."""


def install_kchaos(nodes: Sequence[Node], *, python: str = "python3",
                   timeout: float = 300.0) -> None:
    """Install kchaos into a venv on each node's host (see the module
    docstring) and set node.python; python is the host's interpreter the
    venv is made from."""
    nodes = list(nodes)
    if not nodes:
        return
    started = time.monotonic()
    targets = {node.name: _probe(node, python) for node in nodes}
    with tempfile.TemporaryDirectory(prefix="kchaos-install-") as scratch:
        scratch = Path(scratch)
        try:
            own = build_wheel(scratch / "src", scratch / "kchaos")
            requirements = node_requirements()
            wheelhouses = {target: _download(target, requirements, scratch / f"deps-{i}")
                           for i, target in enumerate(sorted(set(targets.values()), key=repr))}
        except WheelhouseError as e:
            raise InstallError(str(e)) from None
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            futures = {node.name: pool.submit(_install, node, python, own,
                                              wheelhouses[targets[node.name]], requirements,
                                              timeout)
                       for node in nodes}
        failed = [f"{name}: {future.exception()}" for name, future in futures.items()
                  if future.exception() is not None]
    if failed:
        raise InstallError("installing kchaos failed on " + "; ".join(failed))
    log.info("kchaos is installed on %s (%.0f s)", ", ".join(n.name for n in nodes),
             time.monotonic() - started)


def _probe(node: Node, python: str) -> Target:
    done = node.run([python, "-c", _PROBE], check=False, timeout=60.0)
    if done.returncode != 0:
        raise InstallError(f"{node.name}: `{python}` does not run on the host (exit "
                           f"{done.returncode}: {(done.stderr or done.stdout).strip()}): "
                           f"install Python {'.'.join(map(str, MIN_PYTHON))} or later there "
                           f"(e.g. apt-get install python3), or pass python= its path")
    found = json.loads(done.stdout)
    version = tuple(found["version"])
    if found["implementation"] != "cpython" or version < MIN_PYTHON:
        raise InstallError(f"{node.name}: `{python}` on the host is {found['implementation']} "
                           f"{'.'.join(map(str, version))}; kchaos needs CPython "
                           f"{'.'.join(map(str, MIN_PYTHON))} or later: install it there and "
                           f"pass python= its path")
    return Target(version, found["machine"], tuple(found["libc"]))


def _download(target: Target, requirements: list[str], dest: Path) -> list[Path]:
    # pip's own wheel too: the venv is made without pip (--without-pip).
    pip = f"pip=={importlib.metadata.version('pip')}"
    return download(target, [pip, *requirements], dest)


def digest(own: Path, dependencies: Sequence[Path], python: str) -> str:
    """What a host's installation is, as 16 hex digits."""
    with zipfile.ZipFile(own) as wheel:
        [record] = [n for n in wheel.namelist() if n.endswith(".dist-info/RECORD")]
        content = wheel.read(record)
    parts = [content, *(d.name.encode() for d in dependencies), python.encode()]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]


def installed_python(node: Node) -> str | None:
    """The venv python of an install_kchaos that completed on node's host
    (whatever version), None if there was none."""
    base = node.workdir / INSTALL
    python = str(base / "venv" / "bin" / "python")
    done = node.run(["test", "-s", str(base / MARKER), "-a", "-x", python], check=False,
                    timeout=30.0)
    return python if done.returncode == 0 else None


def _install(node: Node, python: str, own: Path, dependencies: list[Path],
             requirements: list[str], timeout: float) -> None:
    base = node.workdir / INSTALL
    venv_python = str(base / "venv" / "bin" / "python")
    wanted = digest(own, dependencies, python)
    marker = node.run(["cat", str(base / MARKER)], check=False, timeout=30.0).stdout.strip()
    if marker == wanted and node.run(["test", "-x", venv_python], check=False,
                                     timeout=30.0).returncode == 0:
        log.info("%s: kchaos %s is already installed in %s", node.name, wanted, base)
        node.python = venv_python
        return
    wheels = base / "wheels"
    _step(node, "removing the old installation", ["rm", "-rf", str(base)], 60.0)
    for wheel in [own, *dependencies]:
        node.put(wheels / wheel.name, wheel.read_bytes())
    _step(node, "making the venv", [python, "-m", "venv", "--without-pip", str(base / "venv")],
          120.0, fix=f"check that `{python} -m venv` works on the host")
    [pip_wheel] = [d for d in dependencies if d.name.startswith("pip-")]
    # A pip wheel runs as it is: its `pip` directory is importable from the zip.
    pip = [venv_python, str(wheels / pip_wheel.name / "pip"), "--isolated",
           "--disable-pip-version-check", "install", "--quiet", "--no-index",
           "--no-cache-dir", "--find-links", str(wheels)]
    _step(node, "installing the dependencies", [*pip, *requirements], timeout)
    _step(node, "installing kchaos", [*pip, "--no-deps", str(wheels / own.name)], timeout)
    node.put(base / MARKER, f"{wanted}\n".encode())
    node.python = venv_python
    log.info("%s: installed kchaos %s in %s", node.name, wanted, base)


def _step(node: Node, what: str, argv: list[str], timeout: float, fix: str = "") -> None:
    try:
        node.run(argv, timeout=timeout)
    except CommandError as e:
        raise InstallError(f"{what} failed: {e}" + (f"; {fix}" if fix else "")) from None
    except subprocess.TimeoutExpired:
        raise InstallError(f"{what} did not finish in {timeout:.0f} s: "
                           f"{subprocess.list2cmdline(argv)}") from None
