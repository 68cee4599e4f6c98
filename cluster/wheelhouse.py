"""The wheels a node needs, made here: the kchaos wheel (built from a copy
of the sources, so the work tree gets no build/ directory) and the wheels
of what a node imports — kio (which brings crc32c) for the reference
broker and mfusepy for the disk gate, pinned by pyproject.toml, nothing of
Spark — for the node's Python and platform. The docker node image
(cluster/docker_image.py) and the ssh install (cluster/ssh_install.py)
both install from them, so nodes need no package index.

The wheels come from the package index pip is configured with here
(pip.conf, PIP_INDEX_URL, PIP_FIND_LINKS).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from cluster.node import SetupError

PROJECT = Path(__file__).resolve().parents[1]
# A node runs the reference broker (kio) and the disk gate (mfusepy);
# everything else kchaos needs stays with the harness.
NODE_DEPENDENCIES = ("kio", "mfusepy")


class WheelhouseError(SetupError, RuntimeError):
    """The wheels for a node could not be made."""


@dataclass(frozen=True)
class Target:
    """What a node's wheels must fit."""
    version: tuple[int, int]
    machine: str
    libc: tuple[str, str]        # ("glibc", "2.36"); ("", "") on musl

    def pip_download_args(self) -> list[str]:
        """pip download's options for wheels that install on this target: its
        CPython, and every manylinux (or musllinux) its C library runs."""
        major, minor = self.version
        args = ["--only-binary=:all:", "--python-version", f"{major}.{minor}",
                "--implementation", "cp", "--abi", f"cp{major}{minor}", "--abi", "abi3"]
        if self.libc[0] == "glibc":
            glibc = int(self.libc[1].split(".")[1])
            platforms = [f"manylinux_2_{k}" for k in range(glibc, 4, -1)]
            # Wheels tagged only with the legacy aliases of 2_17, 2_12 and 2_5.
            platforms += [alias for alias, k in (("manylinux2014", 17), ("manylinux2010", 12),
                                                 ("manylinux1", 5)) if glibc >= k]
        else:
            platforms = ["musllinux_1_2", "musllinux_1_1"]
        for platform in platforms:
            args += ["--platform", f"{platform}_{self.machine}"]
        return args


def project_sources(project: Path = PROJECT) -> list[Path]:
    """The files the kchaos wheel is built from, relative to project: its
    packages (as pyproject.toml's packages.find includes them), less
    bytecode, and pyproject.toml and README.md."""
    pyproject = project / "pyproject.toml"
    if not pyproject.is_file():
        raise WheelhouseError(f"building kchaos for a node needs the kchaos source tree, and "
                              f"{pyproject} does not exist: run from a checkout of kchaos")
    config = tomllib.loads(pyproject.read_text())
    packages = [pattern.rstrip("*") for pattern in
                config["tool"]["setuptools"]["packages"]["find"]["include"]]
    files = [Path("pyproject.toml"), Path("README.md")]
    for package in sorted(set(packages)):
        for path in sorted((project / package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.append(path.relative_to(project))
    return files


def node_requirements(project: Path = PROJECT) -> list[str]:
    """The pinned requirements (from pyproject.toml) of NODE_DEPENDENCIES."""
    config = tomllib.loads((project / "pyproject.toml").read_text())
    pins = {}
    for requirement in config["project"]["dependencies"]:
        name = requirement.split("==")[0].split(">")[0].split("<")[0].strip().lower()
        pins[name] = requirement
    missing = [name for name in NODE_DEPENDENCIES if name not in pins]
    if missing:
        raise WheelhouseError(f"pyproject.toml pins none of {missing}, which a node "
                              f"installs: add them to [project] dependencies")
    return [pins[name] for name in NODE_DEPENDENCIES]


def build_wheel(scratch: Path, dest: Path) -> Path:
    """The kchaos wheel, in dest; scratch holds the copy of the sources."""
    for relative in project_sources():
        (scratch / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PROJECT / relative, scratch / relative)
    pip("wheel", "--no-deps", "--wheel-dir", str(dest), str(scratch))
    [wheel] = dest.glob("kchaos-*.whl")
    return wheel


def download(target: Target, requirements: list[str], dest: Path) -> list[Path]:
    """The wheels of requirements (and their dependencies) for target."""
    pip("download", "--dest", str(dest), *target.pip_download_args(), *requirements)
    return sorted(dest.glob("*.whl"))


def pip(*args: str) -> None:
    argv = [sys.executable, "-m", "pip", "--quiet", *args]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise WheelhouseError(f"{subprocess.list2cmdline(argv)} exited with {done.returncode} "
                              f"(a node's wheels come from the package index pip is "
                              f"configured with here): {done.stderr.strip()[-2000:]}")
