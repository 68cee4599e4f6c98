"""Figures a benchmark writes into docs/performance.md itself, so that the
page is not retyped by hand: the text between `<!-- figures:NAME -->` and
`<!-- /figures:NAME -->` is replaced (the markers must exist; a benchmark
run with --write-docs on a page without them is an error, not a silent
no-op)."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "performance.md"


def machine() -> str:
    """What the figures were measured on, and whether it was idle."""
    load = os.getloadavg()[0]
    return (f"{os.cpu_count()} cores, Python {platform.python_version()}, "
            f"load average {load:.2f} at the start ({'idle' if load < 1 else 'not idle'})")


def write_block(name: str, text: str, page: Path = PAGE) -> None:
    begin, end = f"<!-- figures:{name} -->", f"<!-- /figures:{name} -->"
    content = page.read_text()
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(content):
        raise SystemExit(f"{page}: no {begin} … {end} block to write the figures into; "
                         "add the two markers where they belong")
    page.write_text(pattern.sub(lambda _: f"{begin}\n{text.strip()}\n{end}", content))
    print(f"written to {page} ({name})")
