"""A chaos suite as pytest tests — copy this file next to your own tests.

Installing kchaos registers the `kchaos` fixture (kchaos.pytest_plugin). Each
call runs one test: a local 3-node reference cluster (or `db="external",
bootstrap=...` for yours), the queue workload with real clients, the final
reads and the checks; the result says whether the history is valid.

    pytest examples/test_chaos_suite.py
"""


def test_a_clean_run_is_valid(kchaos):
    result = kchaos(time_limit=30, partitions=4, replication_factor=3,
                    broker_config=["min.insync.replicas=2"])
    assert result.valid is True, (result.counts, result.run_dir)


def test_client_crashes_lose_nothing(kchaos):
    result = kchaos(time_limit=30, crash_clients_every=5, consumer_mode="subscribe",
                    allowed=["resume-rewind"])
    assert result.valid is True, (result.counts, result.run_dir)


# Against a cluster you run yourself:
#
# def test_my_cluster(kchaos):
#     result = kchaos(db="external", bootstrap="broker1:9092,broker2:9092", time_limit=60)
#     assert result.valid is True, result.counts
