"""Deaths a fault explains (nemesis/effects.py): a broker that exited of
EIO injected on its own node, shown by its log, is the fault's effect;
every near miss — another node's fault, a death with no I/O error in the
log, a fault that failed to apply, a fault that injects no errors — stays
a node failure."""

from __future__ import annotations

from nemesis.effects import explained

KAFKA_HALT = (
    "2026-11-27T19:58:59.683 [main] ERROR kafka.server.SharedServer - Got exception while "
    "starting SharedServer\n"
    "org.apache.kafka.common.errors.KafkaStorageException: Error while reading checkpoint file "
    "/n2/data/__cluster_metadata-0/leader-epoch-checkpoint\n"
    "Caused by: java.nio.file.FileSystemException: /n2/data/__cluster_metadata-0/"
    "leader-epoch-checkpoint: Input/output error\n"
    "2026-11-27T19:58:59.861 [main] ERROR ProcessTerminatingFaultHandler - Encountered fatal "
    "fault: caught exception\n")
# EIO on an mmapped file: SIGBUS, which the JVM reports so (seen in a
# Kafka run with disk errors on every node).
KAFKA_SIGBUS = (
    "2026-11-28T19:15:44.365 [main] ERROR kafka.server.SharedServer - [SharedServer id=2] Got "
    "exception while starting SharedServer\n"
    "java.lang.InternalError: a fault occurred in a recent unsafe memory access operation in "
    "compiled Java code\n")
REFERENCE_EXIT = "2026-11-27 12:00:01 ERROR broker: cannot serve p-1: [Errno 5] Input/output error"


def completion(f: str, nodes: list[str], type: str = "info") -> dict:
    return {"f": f, "type": type, "value": {"mode": "errors", "nodes": nodes}}


def test_a_broker_that_died_of_errors_injected_on_its_node_is_the_faults_effect():
    realised = [completion("disk-errors", ["n1", "n2"]), completion("stop-disk-errors", ["n1"])]
    assert explained("n2", realised, KAFKA_HALT).endswith("leader-epoch-checkpoint: "
                                                          "Input/output error")
    assert explained("n1", realised, REFERENCE_EXIT) == REFERENCE_EXIT
    assert explained("n2", realised, KAFKA_SIGBUS).startswith("java.lang.InternalError")


def test_near_misses_stay_node_failures():
    # The errors were injected on another node.
    assert explained("n3", [completion("disk-errors", ["n1", "n2"])], KAFKA_HALT) is None
    # The node had errors, but its broker died of something else.
    assert explained("n2", [completion("disk-errors", ["n2"])],
                     "ERROR OutOfMemoryError: Java heap space\n") is None
    # The fault failed to apply.
    assert explained("n2", [completion("disk-errors", ["n2"], type="fail")], KAFKA_HALT) is None
    # A stalled disk injects no error.
    assert explained("n2", [completion("stall-disk", ["n2"])], KAFKA_HALT) is None
    assert explained("n2", [], KAFKA_HALT) is None
    assert explained("n3", [completion("disk-errors", ["n2"])], KAFKA_SIGBUS) is None
