"""The kchaos node image (docker/Dockerfile), built when missing.

Its tag is `kchaos-node:<digest>`, the digest of everything that goes into
it: the project's packages, pyproject.toml, the Dockerfile and the pinned
versions of the node's dependencies. A changed project gets a new tag and so
a new build; an unchanged one reuses the image (no build at all).
`kchaos-node:latest` follows the last image ensured, for docker/compose.yaml.

The build context is made in a temporary directory: the Dockerfile, and a
wheelhouse with the kchaos wheel (built from a copy of the sources, so the
work tree gets no build/ directory) and the wheels of the node's
dependencies (`pip download`, for CPython 3.11 on bookworm's glibc). The
Docker build itself then needs no network.

The base image: `base_image=` (or KCHAOS_DOCKER_BASE), else
`python:3.11-slim-bookworm` when the engine has it or can pull it, else the
offline base (docker/build-offline-base.sh: debootstrap, no registry).

    python -m cluster.docker_image [--base IMAGE] [--rebuild]
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cluster.docker_engine import BASE_LABEL, LABEL, SOURCE_LABEL, DockerUnavailable, connect
from cluster.wheelhouse import (PROJECT, Target, WheelhouseError, build_wheel, download,
                               node_requirements, project_sources)
from cluster.node import SetupError

log = logging.getLogger("cluster")

REPOSITORY = "kchaos-node"
OFFLINE_BASE = "kchaos-offline-base:bookworm"
BASE_SETTING = "KCHAOS_DOCKER_BASE"
VENV = "/opt/kchaos"
NODE_PYTHON = f"{VENV}/bin/python"
DOCKER_DIR = PROJECT / "docker"
# The Dockerfile's own default (ARG BASE_IMAGE=...), so a build by hand and
# ours start from the same base.
DEFAULT_BASE = re.search(r"^ARG BASE_IMAGE=(\S+)$", (DOCKER_DIR / "Dockerfile").read_text(),
                         re.MULTILINE).group(1)
# The image's Python: CPython 3.11 on bookworm's glibc 2.36, whichever base.
BOOKWORM = Target((3, 11), platform.machine(), ("glibc", "2.36"))


class ImageBuildError(SetupError, RuntimeError):
    """The node image (or its base, or its wheels) could not be built."""


def source_digest(project: Path = PROJECT) -> str:
    """12 hex digits over the sources, the Dockerfile and the node's pins."""
    digest = hashlib.sha256()
    for relative in [*project_sources(project), Path("docker/Dockerfile")]:
        digest.update(str(relative).encode() + b"\0")
        digest.update((project / relative).read_bytes() + b"\0")
    digest.update("\n".join(node_requirements(project)).encode())
    return digest.hexdigest()[:12]


def image_tag(project: Path = PROJECT) -> str:
    return f"{REPOSITORY}:{source_digest(project)}"


def ensure_image(client=None, *, base_image: str | None = None, rebuild: bool = False) -> str:
    """The tag of the node image for the current sources, built first when
    the engine lacks it (or when rebuild, or when base_image is given and
    the existing image was built on another base)."""
    import docker

    client = client or connect()
    tag = image_tag()
    base_image = base_image or os.environ.get(BASE_SETTING) or None
    try:
        existing = client.images.get(tag)
    except docker.errors.ImageNotFound:
        existing = None
    built_on = (existing.labels or {}).get(BASE_LABEL) if existing else None
    if existing is None or rebuild or (base_image and built_on != base_image):
        build_image(client, tag, choose_base(client, base_image))
        if existing is not None:
            _remove_quietly(client, existing.id)    # untagged now: a dangling image
    client.images.get(tag).tag(REPOSITORY, "latest")
    return tag


def choose_base(client, base_image: str | None) -> str:
    """The base to build on (see the module docstring), made present."""
    if base_image == OFFLINE_BASE or (base_image is None and _has(client, OFFLINE_BASE)
                                      and not _has(client, DEFAULT_BASE)):
        build_offline_base(client)
        return OFFLINE_BASE
    wanted = base_image or DEFAULT_BASE
    if _has(client, wanted) or _pull(client, wanted):
        return wanted
    if base_image is not None:
        raise ImageBuildError(f"base_image={base_image!r} is not in the Docker engine and "
                              f"cannot be pulled: docker pull it, or leave base_image unset "
                              f"to build on the offline base {OFFLINE_BASE}")
    log.info("%s cannot be pulled (no registry?): building on the offline base %s",
             DEFAULT_BASE, OFFLINE_BASE)
    build_offline_base(client)
    return OFFLINE_BASE


def build_offline_base(client) -> None:
    """docker/build-offline-base.sh, unless the engine has the offline base."""
    if _has(client, OFFLINE_BASE):
        return
    script = DOCKER_DIR / "build-offline-base.sh"
    started = time.monotonic()
    done = subprocess.run(["sh", str(script), OFFLINE_BASE], capture_output=True, text=True)
    if done.returncode != 0:
        raise ImageBuildError(f"{script} {OFFLINE_BASE} exited with {done.returncode}: "
                              f"{(done.stderr or done.stdout).strip()}")
    log.info("built the offline base %s in %.0f s", OFFLINE_BASE, time.monotonic() - started)


def build_image(client, tag: str, base: str) -> None:
    """Build docker/Dockerfile on base as tag, from a fresh build context."""
    import docker

    started = time.monotonic()
    log.info("building the node image %s on %s", tag, base)
    with tempfile.TemporaryDirectory(prefix="kchaos-image-") as scratch:
        context = Path(scratch) / "context"
        make_context(context, Path(scratch) / "src")
        try:
            client.images.build(
                path=str(context), tag=tag, rm=True, forcerm=True, pull=False,
                buildargs={"BASE_IMAGE": base, "VENV": VENV},
                labels={LABEL: "1", SOURCE_LABEL: tag.partition(":")[2], BASE_LABEL: base})
        except docker.errors.BuildError as e:
            lines = [chunk.get("stream", chunk.get("error", "")) for chunk in e.build_log]
            tail = "".join(lines).strip().splitlines()[-15:]
            raise ImageBuildError(f"building {tag} on {base} failed: {e.msg}\n"
                                  + "\n".join(tail)) from None
        except docker.errors.APIError as e:
            raise ImageBuildError(f"building {tag} on {base} failed: {e}") from None
    log.info("built the node image %s in %.0f s", tag, time.monotonic() - started)


def make_context(context: Path, src: Path) -> None:
    """The Dockerfile and wheelhouse/{deps,kchaos} in context; src is scratch
    for the copy of the sources the kchaos wheel is built from."""
    context.mkdir(parents=True)
    shutil.copy2(DOCKER_DIR / "Dockerfile", context / "Dockerfile")
    deps, own = context / "wheelhouse" / "deps", context / "wheelhouse" / "kchaos"
    requirements = node_requirements()
    try:
        build_wheel(src, own)
        download(BOOKWORM, requirements, deps)
    except WheelhouseError as e:
        raise ImageBuildError(str(e)) from None
    (deps / "requirements.txt").write_text("".join(f"{r}\n" for r in requirements))


def _has(client, image: str) -> bool:
    import docker
    try:
        client.images.get(image)
        return True
    except docker.errors.ImageNotFound:
        return False


def _remove_quietly(client, image_id: str) -> None:
    import docker
    try:
        client.images.remove(image_id)
    except docker.errors.APIError as e:  # in use by a container, or tagged again
        log.info("keeping the replaced image %s: %s", image_id[:19], e.explanation or e)


def _pull(client, image: str) -> bool:
    import docker
    repository, _, tag = image.partition(":")
    try:
        client.images.pull(repository, tag=tag or "latest")
        return True
    except docker.errors.APIError as e:
        log.info("docker pull %s: %s", image, e.explanation or e)
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cluster.docker_image",
        description="Build the kchaos node image when missing; print its tag.")
    parser.add_argument("--base", help=f"base image (default: ${BASE_SETTING}, else "
                        f"{DEFAULT_BASE} if present or pullable, else {OFFLINE_BASE})")
    parser.add_argument("--rebuild", action="store_true", help="build even if it exists")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        print(ensure_image(base_image=args.base, rebuild=args.rebuild))
    except (DockerUnavailable, ImageBuildError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
