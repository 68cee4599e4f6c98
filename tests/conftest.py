"""Shared fixtures: one Spark session for the whole test run."""

from __future__ import annotations

import os

import pytest

# Every JVM the tests start on this machine (Spark drivers and executors,
# Apache Kafka's brokers and storage formats, `kchaos check` subprocesses)
# compiles with C1 only. The suite's histories and runs are small, so C2's
# compiles cost more than they win back: alone, the standalone-cluster check
# took 228 CPU-seconds instead of 380 and the Kafka cluster tests 86 instead
# of 134 (docs/testing.md). Each JVM prints "Picked up JAVA_TOOL_OPTIONS" to
# its stderr. Containers and ssh sessions do not inherit it: the Kafka runs
# there take it in the broker's environment (tests/kafka_support.py).
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from history_analysis.spark import spark_session
    session = spark_session(master="local[2]", conf={"spark.driver.memory": "2g"},
                            scratch_dir=tmp_path_factory.mktemp("spark-scratch"))
    yield session
    session.stop()


# Tests that must not run at the same time as each other, by module, under
# pytest-xdist (`make test`: -n 3 --dist loadgroup): the end-to-end runs on
# the default subnet (198.18.0.0/24, namespaces `kchaos-n*`), since a run's
# setup removes what exists under its prefix; the clusters on loopback
# nodes (127.0.0.11, ... with the brokers' fixed ports); and the ssh
# backend's tests, which share one set of hosts. Each group is one unit of work for one
# worker, scheduled first; every other test is a unit of its own.
# (xdist's own loadgroup marks nodeids in a way pytest 9 no longer reads.)
GROUPS = {**{f"tests/kchaos/{name}": "default-subnet" for name in (
              "test_run.py", "test_nemesis_run.py", "test_heal.py")},
          # The recipes run on a subnet of their own (test_matrix.py's).
          "tests/validation/test_matrix.py": "recipes",
          **{path: "loopback-nodes" for path in (
              "tests/nemesis/test_process.py", "tests/cluster/test_db.py",
              "tests/cluster/test_system_spec.py")},
          "tests/cluster/test_ssh.py": "ssh-hosts",
          # Its local runs share one subnet (198.18.9.0/24), and its docker
          # test counts that subnet's namespaces as its own leftovers.
          "tests/cli/test_sigterm.py": "sigterm-subnet",
          # Single tests: the two that bring up docker/compose.yaml, whose
          # containers, network and host ports have fixed names (a second
          # `up` meanwhile fails: "Pool overlaps with other one").
          **{test: "compose" for test in (
              "tests/cluster/test_docker.py::test_compose_cluster_serves_a_client_and_goes_away",
              "tests/kchaos/test_docker_run.py::test_a_compose_cluster_takes_kills_and_partitions"
          )}}


def group_of(nodeid: str) -> str | None:
    return GROUPS.get(nodeid.split("[")[0]) or GROUPS.get(nodeid.split("::")[0])


def pytest_collection_modifyitems(config, items):
    # The long groups first, so they start at once rather than last. (All
    # tests marked slow first as well put every heavy run at the start at
    # once: load average 15, and three runs failed on time.)
    items.sort(key=lambda item: group_of(item.nodeid) is None)


@pytest.hookimpl(optionalhook=True)   # only when pytest-xdist is installed
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid) or nodeid

    return Groups(config, log)


def pytest_addoption(parser):
    parser.addoption("--full-matrix", action="store_true",
                     help="also run the whole validation matrix (every bug switch's "
                          "recipe; over an hour) — make validate runs it as kchaos validate")


@pytest.fixture
def full_matrix(request) -> None:
    if not request.config.getoption("--full-matrix"):
        pytest.skip("the full validation matrix runs with --full-matrix (or make validate)")
