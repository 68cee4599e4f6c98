"""The history contract in code: the durable writer, the streaming reader and
validator, and the rules of docs/history.md they share."""

from __future__ import annotations

from history_analysis.history.schema import SCHEMA_VERSION, Violation
from history_analysis.history.outcome import (
    HistoryError, HistoryReport, TruncatedLine, Unmatched,
)
from history_analysis.history.reader import HistoryReader
from history_analysis.history.scan import validate_history
from history_analysis.history.writer import HistoryWriter

__all__ = [
    "SCHEMA_VERSION", "HistoryError", "HistoryReader", "HistoryReport", "HistoryWriter",
    "TruncatedLine", "Unmatched", "Violation", "validate_history",
]

