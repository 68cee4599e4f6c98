"""One run configuration: the command line, config files, keyword arguments
and test.json all come from TestConfig's fields (kchaos/options.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from kchaos.config import TestConfig
from kchaos.config_checks import validate
from kchaos.options import from_flat, leaves, read_config_file
from workloads.clients import ClientSettings
from workloads.queue_config import QueueConfig


def test_every_setting_is_an_option_with_its_help_and_default():
    params = {p.name: p for p in cli.commands["run"].params}
    for leaf in leaves(TestConfig):
        if not leaf.field.metadata["cli"]:
            assert leaf.name not in params
            continue
        option = params[leaf.name]
        assert leaf.field.metadata["help"] and option.help.startswith(leaf.field.metadata["help"])
        # The default lives in the field only: the option leaves it out.
        assert option.default in (None, ()), leaf.name


def test_nested_parts_are_tables_in_test_json_and_flat_in_python():
    config = TestConfig.build(partitions=3, acks="1", idempotence=False, seed=4, nodes=5)
    assert config.workload.partitions == 3
    assert config.workload.client_settings.acks == "1"
    body = json.loads(json.dumps(config.to_json()))
    assert body["workload"]["client_settings"]["acks"] == "1"
    assert TestConfig.from_json(body) == config
    whole = TestConfig.build(client_settings=ClientSettings(linger_ms=7))
    assert whole.workload.client_settings.linger_ms == 7
    assert TestConfig.build(workload=QueueConfig(groups=2)).workload.groups == 2


def test_unknown_settings_are_named():
    with pytest.raises(TypeError, match="partitons=3: not a setting of TestConfig"):
        TestConfig.build(partitons=3)
    with pytest.raises(ValueError, match=r"config\.workload\.partitons: not a setting"):
        TestConfig.from_json({"workload": {"partitons": 3}})
    with pytest.raises(ValueError, match=r"config\.workload: expected a table"):
        TestConfig.from_json({"workload": 3})


def test_a_config_file_under_the_command_line(tmp_path):
    path = tmp_path / "test.toml"
    path.write_text('name = "suite-a"\ntime_limit = 20\nnemesis = ["kill"]\n'
                    '[workload]\npartitions = 2\n[workload.client_settings]\nacks = "1"\n'
                    'idempotence = false\n')
    base = read_config_file(path)
    config = from_flat(TestConfig, {"time_limit": 7.5, "rate": 50.0}, base)
    assert (config.name, config.time_limit, config.nemesis) == ("suite-a", 7.5, ["kill"])
    assert (config.workload.partitions, config.workload.rate) == (2, 50.0)
    assert config.workload.client_settings.acks == "1"
    # What the file left out keeps the field's one default.
    assert config.recovery_time == dataclasses.fields(TestConfig)[
        [f.name for f in dataclasses.fields(TestConfig)].index("recovery_time")].default
    assert isinstance(TestConfig.build(time_limit=20).time_limit, float)


def run_here(*args):
    return CliRunner().invoke(cli, ["run", *args], catch_exceptions=False)


def test_run_reads_the_file_and_its_errors_name_it(tmp_path):
    store = tmp_path / "store"
    path = tmp_path / "test.toml"
    path.write_text("[workload]\npartitions = 0\nconcurrency = 1\n")
    result = run_here("--config-file", str(path), "--store", str(store))
    assert result.exit_code == 3 and "partitions=0: must be at least 1" in result.stderr
    # The command line wins over the file: now the file's other mistake shows.
    result = run_here("--config-file", str(path), "--partitions", "2", "--store", str(store))
    assert result.exit_code == 3 and "concurrency=1: must be at least 2" in result.stderr
    path.write_text("[workload]\nshards = 2\n")
    result = run_here("--config-file", str(path), "--store", str(store))
    assert result.exit_code == 3
    assert f"{path}: config.workload.shards: not a setting" in result.stderr
    path.write_text("partitions = [")
    result = run_here("--config-file", str(path), "--store", str(store))
    assert result.exit_code == 3 and "not valid TOML" in result.stderr
    result = run_here("--config-file", str(tmp_path / "none.toml"), "--store", str(store))
    assert result.exit_code == 3 and "no such config file" in result.stderr
    assert not store.exists()


REFERENCE_SPEC = Path(__file__).resolve().parents[2] / "examples" / "systems" / "reference.toml"


@pytest.mark.parametrize("flat, message", [
    ({"db": "command"}, "--db command needs --system"),
    ({"nemesis": ["kill"], "db": "external", "bootstrap": "h:9092"},
     "cannot reach the nodes of a cluster it does not run"),
    ({"nemesis": ["kill"], "db": "external", "bootstrap": "h:9092",
      "nodes": ["h1", "h2"]}, "need --broker-process PATTERN"),
    ({"nemesis": ["disk"], "db": "external", "bootstrap": "h:9092",
      "docker_containers": ["a", "b"]}, "disk faults put a disk gate"),
    ({"nodes": ["h1", "h2"], "backend": "docker"}, "hosts are for --backend ssh"),
    ({"backend": "ssh"}, "the ssh backend needs the hosts"),
    ({"docker_containers": ["a"]}, "use --db external --bootstrap"),
    ({"bugs": ["x"], "db": "external", "bootstrap": "h:1"}, "bug switches are the reference"),
    ({"bugs": ["no-such-bug"]}, "--bug 'no-such-bug': no such bug switch; known: acks-all"),
    ({"broker_config": ["log.retention.ms=1"]},
     "--config 'log.retention.ms=1': unknown setting 'log.retention.ms'"),
    ({"broker_config": ["min.insync.replicas=two"]}, "bad value 'two'"),
    ({"topic_config": ["min.insync.replicas"]}, "is not KEY=VALUE"),
    ({"controller_node": True, "db": "external", "bootstrap": "h:1"},
     "--db external runs no controller of kchaos.s"),
    ({"controller_node": True, "nodes": ["h1", "h2", "h3"]}, "more than the 2 brokers"),
    ({"db": "kafka", "kafka_version": "v4.4.0"}, "kafka_version='v4.4.0': not a Kafka release"),
    ({"db": "kafka", "controller_node": True, "nodes": ["h1", "h2", "h3", "h4", "h5"]},
     "more than the 2 brokers"),
    ({"db": "kafka", "broker_config": ["unclean.leader.election.enable"]}, "write KEY=VALUE"),
    ({"db": "external", "bootstrap": "h:1", "broker_config": ["a=1"]},
     "not kchaos's to set: drop --config"),
    ({"db": "command", "system": str(REFERENCE_SPEC), "broker_config": ["a=1"]},
     r"has no \{config\} in its files, so --config would change nothing"),
])
def test_combinations_that_cannot_run(flat, message):
    with pytest.raises(ValueError, match=message):
        validate(TestConfig.build(**flat))


def test_nodes_are_a_count_or_hosts():
    assert TestConfig.build(nodes=["h1", "h2", "h3"]).node_backend() == "ssh"
    assert TestConfig.build().node_backend() == "local"
    config = TestConfig.build(db="external", bootstrap="c1:9092", docker_containers=["c1"])
    assert (config.node_backend(), config.node_count(), config.has_nodes()) == ("docker", 1, True)
    assert TestConfig.build(db="external", bootstrap="h:1").has_nodes() is False
    # The controller's own node comes after the brokers'.
    separate = TestConfig.build(controller_node=True)
    assert (separate.node_count(), separate.broker_count()) == (4, 3)
    hosts = TestConfig.build(controller_node=True, nodes=["h1", "h2", "h3", "h4"])
    assert (hosts.node_count(), hosts.broker_count()) == (4, 3)
    # Kafka's controller quorum: three nodes of their own.
    kafka = TestConfig.build(db="kafka", controller_node=True)
    assert (kafka.node_count(), kafka.broker_count()) == (6, 3)
    assert TestConfig.build(db="kafka").node_count() == 3


def test_nodes_on_the_command_line_are_a_count_or_hosts(tmp_path):
    store = str(tmp_path / "store")
    result = run_here("--nodes", "h1,h2", "--backend", "docker", "--store", store)
    assert result.exit_code == 3 and "hosts are for --backend ssh" in result.stderr
    result = run_here("--nodes", "2", "--store", store)
    assert result.exit_code == 3
    assert "replication_factor=3: more than the 2 brokers" in result.stderr


def test_a_docker_engine_that_does_not_answer_is_one_line_of_bad_input(tmp_path):
    """No cluster starts, so this needs no Docker: the engine is asked for
    first, at a socket that does not exist."""
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    done = subprocess.run([sys.executable, "-m", "cli", "run", "--backend", "docker",
                           "--subnet", "198.18.29.0/24", "--store", str(tmp_path / "store")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 3, done.stderr
    # One line of error (the rest of stderr is the phases' progress), no traceback.
    errors = [line for line in done.stderr.splitlines() if line.startswith("kchaos: error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert errors[0].startswith("kchaos: error: cannot reach the Docker daemon")
    assert "DOCKER_HOST" in errors[0]
