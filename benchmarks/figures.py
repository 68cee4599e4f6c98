"""The benchmarks' --write-docs: their figures into docs/performance.md,
through validation/figures.py (one definition of the markers and the stamp)."""

from __future__ import annotations

from validation.figures import DOCS, machine, stamp
from validation.figures import write_block as _write_block

PAGE = DOCS / "performance.md"

__all__ = ["machine", "write_block"]


def write_block(name: str, text: str) -> None:
    _write_block(PAGE, name, f"{text.strip()}\n\n({stamp()}.)")
    print(f"written to {PAGE} ({name})")
