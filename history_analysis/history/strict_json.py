"""One line of a history as JSON, as the contract has it (docs/history.md).

Every path that parses a line — the exact validator, the fast pass's
nemesis lines and its fallback parse — uses this `loads`, so they agree on
what JSON is.
"""

from __future__ import annotations

import json


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


# Python's json takes NaN and Infinity; the contract does not: they are not JSON.
loads = json.JSONDecoder(parse_constant=_not_json).decode
