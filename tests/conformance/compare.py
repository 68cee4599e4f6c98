"""Field-by-field comparison of two normalised answers, with the accepted
divergences (divergences.py) applied by name."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.conformance.divergences import DIVERGENCES, MISSING


@dataclass
class Difference:
    api: str
    path: str
    reference: Any
    kafka: Any
    step: int = -1          # the step's index in its scenario

    def __str__(self) -> str:
        return f"#{self.step} {self.api} {self.path}: reference={_short(self.reference)} " \
               f"kafka={_short(self.kafka)}"


@dataclass
class Outcome:
    """What a comparison found: differences no divergence explains, and
    how often each named divergence was applied."""
    unexplained: list[Difference] = field(default_factory=list)
    applied: Counter = field(default_factory=Counter)


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def differences(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(path, a's value, b's value) of every leaf where a and b differ;
    dict keys present on one side only show the other as MISSING."""
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for key in list(a) + [k for k in b if k not in a]:
            sub = f"{path}.{key}" if path else str(key)
            found += differences(a.get(key, MISSING), b.get(key, MISSING), sub)
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        found = []
        for i, (x, y) in enumerate(zip(a, b)):
            found += differences(x, y, f"{path}.{i}" if path else str(i))
        return found
    return [] if a == b else [(path, a, b)]


def compare(api: str, reference: Any, kafka: Any, step: Any, outcome: Outcome,
            index: int = -1) -> None:
    for path, ref, kaf in differences(reference, kafka):
        divergence = next((d for d in DIVERGENCES
                           if d.matches(api, path, ref, kaf, step, (reference, kafka))), None)
        if divergence is None:
            outcome.unexplained.append(Difference(api, path, ref, kaf, index))
        else:
            outcome.applied[divergence.name] += 1
