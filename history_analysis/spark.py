"""The one place that builds the SparkSession kchaos uses.

`local[*]` by default; `master` and `conf` (from `--spark-master` and
`--spark-conf k=v`) point it at a real cluster. Logs are quiet (errors only)
and Spark's scratch space lives under the run directory, so a run leaves
nothing in /tmp and a full disk shows up where the run is.
"""

from __future__ import annotations

import os
import shutil
import sys
from importlib.resources import files
from pathlib import Path
from typing import Iterable, Mapping

DEFAULT_MASTER = "local[*]"

# Settings that hold unless the caller overrides them with --spark-conf.
DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": "4g",
}


SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
# Set when the caller chose the shuffle partitions; otherwise the checkers
# size them to each history's input (checkers/history.py).
FIXED_SHUFFLE_PARTITIONS = "kchaos.shuffle.partitions.fixed"


def parse_conf(pairs: Iterable[str]) -> dict[str, str]:
    """`["k=v", ...]` → dict, with an error that names the bad pair."""
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--spark-conf {pair!r}: expected KEY=VALUE, for example "
                             "spark.driver.memory=8g")
        conf[key.strip()] = value
    return conf


def java_available() -> bool:
    return bool(os.environ.get("JAVA_HOME")) or shutil.which("java") is not None


def spark_session(*, master: str | None = None, conf: Mapping[str, str] | None = None,
                  scratch_dir: str | os.PathLike | None = None):
    """Build (or return the already running) SparkSession.

    `scratch_dir` becomes `spark.local.dir` (shuffle and spill files); it is
    created if missing. A session already running in this process is reused,
    as Spark allows one per JVM.
    """
    if not java_available():
        raise RuntimeError("Spark needs Java 17 or newer and none was found: install it "
                           "(apt-get install default-jre-headless) or set JAVA_HOME")
    from pyspark.sql import SparkSession

    settings = {**DEFAULTS, **(conf or {})}
    if SHUFFLE_PARTITIONS in settings:
        settings[FIXED_SHUFFLE_PARTITIONS] = "true"
    log_config = files("history_analysis").joinpath("log4j2.properties")
    java_options = f"-Dlog4j2.configurationFile=file:{log_config}"
    settings["spark.driver.extraJavaOptions"] = " ".join(
        filter(None, [java_options, settings.get("spark.driver.extraJavaOptions")]))
    if scratch_dir is not None:
        Path(scratch_dir).mkdir(parents=True, exist_ok=True)
        settings.setdefault("spark.local.dir", os.fspath(Path(scratch_dir).resolve()))
    # The checks run numpy in Python workers: the same interpreter (and
    # packages) as this process, unless the environment says otherwise.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master or DEFAULT_MASTER).appName("kchaos")
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
