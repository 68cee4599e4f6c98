"""The benchmarks' --write-docs: their figures into docs/performance.md,
through kchaos/measured.py (one definition of the markers and the stamp)."""

from __future__ import annotations

from kchaos.measured import DOCS, machine, stamp
from kchaos.measured import write_block as _write_block

PAGE = DOCS / "performance.md"

__all__ = ["machine", "write_block"]


def write_block(name: str, text: str) -> None:
    _write_block(PAGE, name, f"{text.strip()}\n\n({stamp()}.)")
    print(f"written to {PAGE} ({name})")
