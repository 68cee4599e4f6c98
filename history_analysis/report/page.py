"""The report page: one HTML file with its style inline and no script, its
plots as PNGs in `plots/` beside it (relative links, so a copied or
downloaded run directory still shows them). Every text that comes from a
run — record values, error strings, node names, the config — goes through
`escape`; nothing from the history is ever markup.
"""

from __future__ import annotations

import json
from html import escape

# A verdict's colour, on the report's badge and in kchaos serve's list.
VERDICT_COLOURS = {"valid": "#2a7d2a", "invalid": "#c62828", "unknown": "#e08a00",
                   "unchecked": "#777"}

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1em;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;margin-top:2em}h3{margin-bottom:.3em}
.verdict{display:inline-block;padding:.2em .7em;border-radius:4px;color:#fff;font-weight:bold}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.2em .5em;
text-align:left;vertical-align:top}th{background:#f4f4f4}
pre{background:#f7f7f7;padding:.5em;overflow-x:auto;font-size:12px;white-space:pre-wrap;
word-break:break-all}
pre .hit{background:#ffe08a}
.case{border-left:3px solid #c62828;padding-left:.8em;margin:1em 0}
.allowed .case{border-left-color:#999}
.note{color:#666;font-size:.9em}
img.plot{max-width:100%;display:block;margin:.5em 0}
.timeline-heads{position:relative;height:1.4em;font-size:11px}
.timeline-heads .head{position:absolute;width:44px;text-align:center;overflow:hidden}
.timeline-box{max-height:700px;overflow:auto;border:1px solid #ddd}
.timeline{position:relative}
.timeline .op{position:absolute;width:42px;box-sizing:border-box;border:1px solid #fff8}
.op.ok{background:#6bbf59}.op.info{background:#f0a030}.op.fail{background:#e05050}
.timeline .gap{position:absolute;left:0;right:0;border-top:2px dashed #999}
"""
STYLE += "".join(f".v-{v}{{background:{c}}}" for v, c in VERDICT_COLOURS.items())

VERDICTS = {True: ("valid", "VALID"), False: ("invalid", "INVALID"),
            "unknown": ("unknown", "UNKNOWN"), None: ("unchecked", "NOT CHECKED")}


def text(value) -> str:
    return escape(str(value), quote=True)


def verdict_badge(valid) -> str:
    css, label = VERDICTS.get(valid, VERDICTS["unknown"])
    return f'<span class="verdict v-{css}">{label}</span>'


def table(header: list[str], rows: list[list], raw: bool = False) -> str:
    """A table (no header row when `header` is empty); cells are escaped
    unless `raw` (cells built here)."""
    cell = (lambda c: str(c)) if raw else text
    head = "<tr>" + "".join(f"<th>{text(h)}</th>" for h in header) + "</tr>" if header else ""
    body = "".join("<tr>" + "".join(f"<td>{cell(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<table>{head}{body}</table>"


def pre_json(value) -> str:
    return f"<pre>{text(json.dumps(value, indent=1, sort_keys=True, default=str))}</pre>"


def excerpt(lines: dict[int, str], numbers: list[int], hits: set[int]) -> str:
    out = []
    previous = None
    for number in numbers:
        if number not in lines:
            continue
        if previous is not None and number > previous + 1:
            out.append("   …")
        line = f"{number:>8}  {text(lines[number])}"
        out.append(f'<span class="hit">{line}</span>' if number in hits else line)
        previous = number
    return "<pre>" + "\n".join(out) + "</pre>" if out else ""


def plot(name: str, alt: str) -> str:
    return f'<img class="plot" src="plots/{text(name)}" alt="{text(alt)}">'


def document(title: str, sections: list[str], style: str = STYLE) -> str:
    """A whole page: no script, inline style, and an empty icon (a browser
    asks for /favicon.ico otherwise, a 404 in its console)."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<link rel="icon" href="data:,">'
            f"<title>{text(title)}</title><style>{style}</style></head><body>"
            + "\n".join(sections) + "</body></html>\n")
