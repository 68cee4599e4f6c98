"""The files of a run directory (docs/history.md, "The run directory"),
named once: `kchaos run` writes them, ingest, the checkers, the report and
`kchaos serve` read them."""

TEST_FILE = "test.json"         # the config; after the run, its outcome
HISTORY_FILE = "history.jsonl"  # the history, appended as the run goes
TABLES_DIR = "history"          # the Parquet tables ingest derives
RESULTS_FILE = "results.json"   # the checkers' verdict, counts and examples
REPORT_FILE = "report.html"     # the report (history_analysis/report)
PLOTS_DIR = "plots"             # the report's images, beside it
LOG_FILE = "kchaos.log"         # the harness's log of the run
NODES_DIR = "nodes"             # each node's logs, collected at teardown
