"""The end-to-end tests' fixed subnets never meet under pytest-xdist: a run's
setup removes what runs under its subnet's prefix, so two tests that may run
at once on one subnet take each other's nodes down (a Kafka run once lost
its containers to another docker test's setup this way). A fixed subnet is
used by one test, or only inside one group of tests/conftest.py's GROUPS,
which run one after another on one worker."""

from __future__ import annotations

import ast
import ipaddress
import re
from collections import defaultdict
from pathlib import Path

from tests.conftest import group_of

TESTS = Path(__file__).resolve().parent
SUBNET = re.compile(r"198\.18\.\d+\.0/24")
# tests/cluster/conftest.py's free_subnet draws from the /24s after these.
FIXED = list(ipaddress.IPv4Network("198.18.0.0/15").subnets(new_prefix=24))[:32]


def uses() -> dict[str, list[tuple[str, str]]]:
    """subnet → (where, the unit of work that holds it) per literal."""
    found = defaultdict(list)
    for path in sorted(TESTS.rglob("*.py")):
        if path == Path(__file__).resolve():
            continue
        module = path.relative_to(TESTS.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for subnet in SUBNET.findall(node.value):
                    unit = group_of(module) or f"{module}:{node.lineno}"
                    found[subnet].append((f"{module}:{node.lineno}", unit))
    return found


def test_each_fixed_subnet_belongs_to_one_test_or_one_group():
    found = uses()
    assert "198.18.12.0/24" in found and "198.18.9.0/24" in found      # the scan sees them
    shared = {subnet: [where for where, _ in places] for subnet, places in found.items()
              if len({unit for _, unit in places}) > 1}
    assert shared == {}, "subnets that tests which may run at once share; give each its own"
    outside = [s for s in found if ipaddress.IPv4Network(s) not in FIXED]
    assert outside == [], "fixed subnets above 198.18.31.0/24 meet free_subnet()'s"
