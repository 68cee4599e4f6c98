"""What `kchaos run` prints of its own outcome before any verdict: here, who
held a last stable offset that the final phase's wait left below its high
watermark (workloads/open_transactions.py)."""

from __future__ import annotations

from pathlib import Path

from cli.run import _echo_outcome
from kchaos.config import TestConfig
from kchaos.run import RunOutcome

HELD = {"topic": "kchaos-t0", "partition": 2, "producer_id": 4001, "producer_epoch": 3,
        "first_offset": 17, "transactional_id": "kchaos-t0-tx1",
        "coordinator": {"state": "CompleteAbort", "producer_epoch": 4, "partitions": []}}


def echoed(final: dict, capsys) -> str:
    _echo_outcome(RunOutcome(Path("/runs/r"), final={"reached": True, **final}),
                  TestConfig())
    return capsys.readouterr().out


def test_each_held_partition_is_printed_with_its_holder(capsys):
    out = echoed({"open_transactions": [HELD]}, capsys)
    assert "stayed below the high watermarks to the end of the final phase's wait\n" in out
    assert "  kchaos-t0-2; its leader said: producer 4001 epoch 3 (kchaos-t0-tx1) holds a " \
           "transaction open from offset 17; its coordinator has it CompleteAbort" in out


def test_a_failed_question_or_no_holder_is_said_on_the_line(capsys):
    out = echoed({"open_transactions": [{"error": "KafkaTimeoutError: 10 s"}]}, capsys)
    assert "final phase's wait; asking who held it failed: KafkaTimeoutError: 10 s" in out
    assert "named no open transaction" in echoed({"open_transactions": []}, capsys)


def test_a_final_phase_that_did_not_ask_prints_nothing_of_it(capsys):
    assert "stable" not in echoed({}, capsys)
