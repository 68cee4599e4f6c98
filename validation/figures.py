"""Tables and figures that measurements write into docs/ themselves (the
validation matrix, the benchmarks), so that no page is retyped by hand: the
text between `<!-- figures:NAME -->` and `<!-- /figures:NAME -->` is
replaced, stamped with the commit and the machine it was measured on. The
markers must exist: writing to a page without them is an error, never a
silent no-op."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def commit() -> str:
    """The checkout's commit (short), `-dirty` with uncommitted changes
    outside docs/ (the pages these figures go to are not the code measured);
    `unknown` outside a git checkout."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(DOCS.parent), *args], capture_output=True,
                              text=True, timeout=30, check=True).stdout.strip()
    try:
        head = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs")
        return head + ("-dirty" if changed else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine() -> str:
    """What a figure was measured on, and whether the machine was idle."""
    load = os.getloadavg()[0]
    return (f"{os.cpu_count()} cores, Python {platform.python_version()}, load average "
            f"{load:.2f} at the start ({'idle' if load < 1 else 'not idle'})")


def stamp() -> str:
    return (f"measured on commit {commit()}, "
            f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M')} UTC")


def _block(name: str) -> tuple[str, str, re.Pattern]:
    """A block's begin and end markers, and the pattern of the block with
    its text (group 1)."""
    begin, end = f"<!-- figures:{name} -->", f"<!-- /figures:{name} -->"
    return begin, end, re.compile(re.escape(begin) + r"\n?(.*?)" + re.escape(end), re.S)


def read_block(page: Path, name: str) -> str:
    """The text of a page's NAME block ("" when there is none yet)."""
    found = _block(name)[2].search(page.read_text())
    return found.group(1) if found else ""


def write_block(page: Path, name: str, text: str) -> None:
    begin, end, pattern = _block(name)
    try:
        content = page.read_text()
    except FileNotFoundError:
        raise FileNotFoundError(f"{page}: no such page to write the {name} figures into "
                                "(docs/ is in the source checkout)") from None
    if not pattern.search(content):
        raise ValueError(f"{page}: no {begin} … {end} block to write the figures into; add "
                         "the two markers where they belong")
    page.write_text(pattern.sub(lambda _: f"{begin}\n{text.strip()}\n{end}", content))
