"""JUnit XML for CI: one test case per run, so a CI system that reads JUnit
(GitLab, Jenkins, GitHub's test reporters) shows each run's verdict.

    <testsuites>
      <testsuite name="kchaos" tests="3" failures="1" errors="1" skipped="0" time="...">
        <testcase classname="kchaos.queue" name="store/queue/20261125T101112" time="...">
          <failure type="invalid" message="INVALID; lost-write 1">...</failure>
        </testcase>
        ...

A valid run passes. An invalid one is a `failure` whose text is the verdict
line, the anomaly counts and the first example of each type. An `unknown`
run is an `error`, not a skip: the run could not show that the system is
correct, which CI must not take as a pass. A run that could not be checked
(bad input) is an `error` with the message. Everything from the history is
escaped by the XML writer.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

EXAMPLE_CHARS = 600     # of each anomaly type's first example in the failure text


@dataclass
class Case:
    run_dir: Path
    seconds: float
    verdict: bool | str | None        # True, False, "unknown"; None: not checked
    line: str = ""                    # the verdict line `kchaos check` prints
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list] = field(default_factory=dict)
    error: str = ""                   # why it could not be checked


def case_of(run_dir: Path, seconds: float, suite, line: str) -> Case:
    result = suite.result
    return Case(run_dir, seconds, suite.valid, line, dict(result.counts),
                {t: list(cases) for t, cases in result.anomalies.items()})


def write_junit(path: Path, cases: list[Case], suite_name: str = "kchaos") -> None:
    failures = sum(1 for c in cases if c.verdict is False)
    errors = sum(1 for c in cases if c.verdict not in (True, False))
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", name=suite_name, tests=str(len(cases)),
                          failures=str(failures), errors=str(errors), skipped="0",
                          time=f"{sum(c.seconds for c in cases):.3f}")
    for case in cases:
        element = ET.SubElement(suite, "testcase", classname=f"kchaos.{_test_name(case)}",
                                name=str(case.run_dir), time=f"{case.seconds:.3f}")
        if case.verdict is False:
            ET.SubElement(element, "failure", type="invalid", message=case.line).text = \
                _details(case)
        elif case.verdict is None:
            ET.SubElement(element, "error", type="bad-input", message=case.error).text = \
                case.error
        elif case.verdict is not True:
            ET.SubElement(element, "error", type="unknown", message=case.line).text = \
                _details(case)
    ET.indent(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def _test_name(case: Case) -> str:
    """The test's name from test.json (`queue` by default), else the run
    directory's parent."""
    try:
        return json.loads((case.run_dir / "test.json").read_text())["name"]
    except (OSError, ValueError, KeyError):
        return case.run_dir.parent.name or "run"


def _details(case: Case) -> str:
    lines = [case.line, "", "anomaly counts:"]
    lines += [f"  {t}: {n}" for t, n in sorted(case.counts.items())] or ["  none"]
    for t, examples in sorted(case.examples.items()):
        if examples:
            text = json.dumps(examples[0], sort_keys=True, default=str)
            lines += ["", f"first {t}:", "  " + text[:EXAMPLE_CHARS]
                      + (" ..." if len(text) > EXAMPLE_CHARS else "")]
    lines += ["", f"run directory: {case.run_dir} (results.json holds every count and example)"]
    return "\n".join(lines)
