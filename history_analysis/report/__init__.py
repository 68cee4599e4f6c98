"""The run report (`report.html` and its plots): history_analysis/report/build.py."""

from history_analysis.report.build import MAX_BYTES, write_report, write_report_quietly

__all__ = ["MAX_BYTES", "write_report", "write_report_quietly"]
