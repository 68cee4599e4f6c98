"""`kchaos run` on ssh hosts — three of the project's own network
namespaces running a real sshd — with the reference broker installed onto
them from this project's wheel, partitions and kills: valid; so is Apache
Kafka there (`--db kafka`). A host whose
key is not the one known_hosts holds is refused before anything starts. A
cluster already running on the hosts takes kills, pauses and partitions
through --nodes, --broker-process and --broker-start."""

from __future__ import annotations

import json
import shlex

import pytest

from cluster.attached_db import per_node
from kchaos.config import TestConfig
from kchaos.progress import Progress
from kchaos.run import nemesis_plan, run_and_check
from nemesis.schedule import make_fault
from tests.kafka_support import kafka_spec_with_local_jvm_options
from tests.kchaos.plans import no_false_alarm, one_kill_and_a_partition
from tests.ssh_support import SSH_MARKS, SshHosts, keygen

pytestmark = [*SSH_MARKS, pytest.mark.spark, pytest.mark.slow]
PATTERN = "reference_broker --node-id [1-9] --listen {address}:"
START = "sh {}/theirs/{{node_name}}/start-broker.sh"     # each node's own script


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    made = SshHosts(tmp_path_factory.mktemp("ssh-hosts"), 3)
    made.setup()
    yield made
    made.teardown()


def ssh_config(hosts: SshHosts, tmp_path, **settings) -> TestConfig:
    """The module's runs share one root on the hosts, as a user's runs on
    their hosts do: kchaos and Kafka's jars are installed by the first run
    and found by the next (each install took 36 s of a loaded suite)."""
    settings = {"nodes": hosts.addresses, "ssh_port": hosts.port,
                "ssh_key_file": str(hosts.key_file), "ssh_known_hosts": str(hosts.known_hosts),
                "ssh_root_dir": str(root(hosts)), "store": tmp_path / "store", **settings}
    return TestConfig.build(**settings)


def root(hosts: SshHosts):
    return hosts.dir / "root"


def test_partitions_and_kills_on_ssh_hosts_are_valid(hosts, tmp_path, spark):
    config = ssh_config(hosts, tmp_path, seed=31, time_limit=30, nemesis=["partition", "kill"],
                        nemesis_interval=4, recovery_time=3, final_time_limit=90)
    assert config.node_backend() == "ssh"
    result = run_and_check(config, spark, progress=Progress.quiet())
    no_false_alarm(result)
    events = [json.loads(line) for line in
              (result.run_dir / "history.jsonl").read_text().splitlines()]
    assert {"start-partition", "kill"} & {e["f"] for e in events if e["process"] == -1
                                          and e["type"] == "info"}
    # The broker ran from the venv kchaos installed on each host.
    assert (root(hosts) / "n1" / "install" / "venv" / "bin" / "python").exists()
    assert (result.run_dir / "nodes" / "n2" / "broker.log").stat().st_size > 0


def test_apache_kafka_on_ssh_hosts(hosts, tmp_path, spark):
    """Kafka's shipped spec (`--db kafka`'s, with the tests' C1 option:
    tests/kafka_support.py) there: Kafka's jars copied once per host root,
    the hosts' own java, partitions and kills applied; valid."""
    settings = dict(time_limit=30, nemesis=["partition", "kill"], nemesis_interval=6)
    config = ssh_config(hosts, tmp_path, db="command", seed=one_kill_and_a_partition(**settings),
                        system=str(kafka_spec_with_local_jvm_options(tmp_path)),
                        recovery_time=3, final_time_limit=90,
                        broker_config=["min.insync.replicas=2"], **settings)
    result = run_and_check(config, spark, progress=Progress.quiet())
    assert result.valid is True, (result.counts, result.suite.result.unknown, result.run_dir)
    events = [json.loads(line) for line in
              (result.run_dir / "history.jsonl").read_text().splitlines()]
    assert {"start-partition", "kill"} <= {e["f"] for e in events if e["process"] == -1
                                           and e["type"] == "info"}
    dist = root(hosts) / "dist" / f"kafka-{config.kafka_version}"
    assert (dist / f"kafka-clients-{config.kafka_version}.jar").is_file()
    assert "Kafka Server started" in (result.run_dir / "nodes" / "n3" / "kafka.log").read_text()


def test_a_wrong_host_key_is_refused_with_how_to_fix_it(hosts, tmp_path, spark):
    wrong = tmp_path / "known_hosts"
    public = keygen(tmp_path / "impostor", "impostor").split()
    lines = hosts.known_hosts.read_text().splitlines()
    name = lines[0].split()[0]
    wrong.write_text("\n".join([f"{name} {public[0]} {public[1]}", *lines[1:]]) + "\n")
    config = ssh_config(hosts, tmp_path, time_limit=5, ssh_known_hosts=str(wrong))
    with pytest.raises(Exception, match=r"(?s)host key.*changed|changed.*host key|ssh-keygen"):
        run_and_check(config, spark, progress=Progress.quiet())
    assert not list((tmp_path / "store").glob("*/*/history.jsonl"))


def test_a_running_cluster_on_ssh_hosts_takes_kills_pauses_and_partitions(hosts, tmp_path,
                                                                           spark):
    """Their cluster: reference brokers the test starts on the hosts itself,
    each with a start script of its own, as a user's service would have.
    kchaos attaches with --nodes, --broker-process and --broker-start."""
    from cluster.db import ReferenceDB
    theirs = hosts.backend(tmp_path / "theirs", 3)
    theirs.setup()
    db = ReferenceDB(config=["broker.session.timeout.ms=3000",
                             "broker.heartbeat.interval.ms=300"])
    try:
        db.start_all(theirs.nodes, timeout=60)
        for node in theirs.nodes:
            script = "exec " + shlex.join(db._broker_argv(node)) + "\n"
            node.put("start-broker.sh", script.encode())
        # The hosts are namespaces of one machine, which share its process
        # table: the pattern names each node's own broker by its address.
        config = ssh_config(hosts, tmp_path, db="external", bootstrap=db.bootstrap_servers(),
                            broker_process=PATTERN, broker_start=START.format(tmp_path),
                            seed=33, time_limit=30,
                            nemesis=["partition", "kill", "pause"], nemesis_interval=4,
                            recovery_time=5, final_time_limit=90)
        result = run_and_check(config, spark, progress=Progress.quiet())
        no_false_alarm(result)
        planned = {make_fault(s.fault).start_f for s in nemesis_plan(config)
                   if s.action == "start"}
        events = [json.loads(line) for line in
                  (result.run_dir / "history.jsonl").read_text().splitlines()]
        done = {e["f"] for e in events if e["process"] == -1 and e["type"] == "info"}
        assert planned and planned <= done, (planned, done)
        # Their brokers run on after the run: kchaos stops nothing of theirs.
        assert all(theirs_running(node) for node in theirs.nodes)
    finally:
        for node in theirs.nodes:
            node.run(["pkill", "-KILL", "-f", per_node(PATTERN, node)], check=False)
        theirs.teardown()


def theirs_running(node) -> bool:
    return node.run(["pgrep", "-f", per_node(PATTERN, node)], check=False).returncode == 0
