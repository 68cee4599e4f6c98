"""Seeded schedules: same seed, same plan; overlap rules; bad input."""

from __future__ import annotations

import pytest

from nemesis.failover import ROLES, Failover
from nemesis.schedule import HOLDS, NEMESES, PERIOD, Single, make_move, plan

ALL = list(NEMESES)


def starts(steps):
    return [s for s in steps if s.action == "start"]


def active_at(steps, t):
    """Fault ids started at or before t and not stopped by then."""
    active = set()
    for step in steps:
        if step.at > t:
            break
        if step.action == "start":
            active.add(step.id)
        else:
            active.discard(step.id)
    return active


def test_the_same_seed_gives_the_same_schedule():
    first = plan(ALL, interval=5, duration=300, seed=7)
    assert first == plan(ALL, interval=5, duration=300, seed=7)
    assert first != plan(ALL, interval=5, duration=300, seed=8)
    assert len(starts(first)) >= 20


def test_every_kind_is_scheduled_and_every_stop_follows_its_start():
    steps = plan(ALL, interval=5, duration=600, seed=1)
    kinds = {s.fault["fault"] for s in starts(steps)}
    assert kinds == {"partition", "pause", "kill", "disk", "packet-loss", "failover"}
    kill_targets = {s.fault.get("targets") for s in starts(steps) if s.fault["fault"] == "kill"}
    assert "all" in kill_targets and len(kill_targets) >= 3, kill_targets
    started = {}
    for step in steps:
        if step.action == "start":
            assert step.id not in started
            started[step.id] = step.at
        else:
            assert step.at > started[step.id]
    assert [s.at for s in steps] == sorted(s.at for s in steps)


def test_faults_overlap_unless_exclusive():
    overlapping = plan(ALL, interval=5, duration=600, seed=3)
    assert any(len(active_at(overlapping, s.at)) > 1 for s in overlapping)
    exclusive = plan(ALL, interval=5, duration=600, seed=3, exclusive=True)
    assert len(starts(exclusive)) >= 20
    assert all(len(active_at(exclusive, s.at)) <= 1 for s in exclusive)


def test_at_most_one_fault_of_a_kind_at_a_time():
    steps = plan(["pause", "kill"], interval=2, duration=600, seed=5)
    for step in steps:
        kinds = [s.fault["fault"] for s in starts(steps) if s.id in active_at(steps, step.at)]
        assert len(kinds) == len(set(kinds))


def test_lose_unsynced_is_alone_on_one_node_after_a_quiet_interval():
    steps = plan(["disk", "pause", "partition"], interval=4, duration=2000, seed=11)
    lossy = [s for s in starts(steps) if s.fault.get("mode") == "lose-unsynced"]
    assert lossy, "no lose-unsynced fault in 2000 s"
    for start in lossy:
        assert start.fault["targets"] == "one"
        assert active_at(steps, start.at) == {start.id}
        stop = next(s for s in steps if s.id == start.id and s.action == "stop")
        # Nothing else runs while it does, nor in the interval before it.
        others = [s for s in steps if s.id != start.id and s.action == "start"]
        assert not [s for s in others if start.at - 4 <= s.at <= stop.at]
        assert not [s for s in steps if s.id != start.id
                    and start.at - 4 <= s.at <= start.at and s.action == "stop"]


def test_targets_come_from_the_allowed_ones():
    steps = plan(["pause", "kill", "packet-loss"], interval=3, duration=300, seed=2,
                 targets=["minority", "leader"])
    used = {s.fault["targets"] for s in starts(steps) if s.fault["targets"] != "all"}
    assert used == {"minority", "leader"}


def test_every_description_builds_its_move():
    built = set()
    for step in starts(plan(ALL, interval=2, duration=400, seed=4)):
        move = make_move(step.fault)
        built.add(type(move))
        assert move.verbs
        if isinstance(move, Single):
            assert move.fault.start_f and move.fault.stop_f and move.fault.asked()
        else:
            assert move.verbs == {"pause", "kill"} and move.role in ROLES
    assert built == {Single, Failover}


def test_a_failover_never_overlaps_a_pause_kill_or_restart_and_holds_below_the_lag_limit():
    steps = plan(["failover", "pause", "kill", "restart-all", "partition"], interval=3,
                 duration=3000, seed=8)
    failovers = [s for s in starts(steps) if s.fault["fault"] == "failover"]
    assert {s.fault["role"] for s in failovers} == set(ROLES)
    assert all(HOLDS[0] <= s.fault["hold"] <= HOLDS[1] for s in failovers)
    process = {s.id for s in starts(steps) if s.fault["fault"] in ("pause", "kill")}
    for step in steps:
        active = active_at(steps, step.at)
        if active & {s.id for s in failovers}:
            assert not active & process, step
    assert any(len(active_at(steps, s.at)) > 1 for s in failovers), "overlaps other kinds"


@pytest.mark.parametrize("kwargs, message", [
    ({"nemeses": ["partition", "earthquake"]}, "earthquake unknown"),
    ({"targets": ["most"]}, "fault_targets='most'"),
    ({"targets": []}, "choose one or more"),
    ({"interval": 0}, "nemesis_interval=0"),
])
def test_bad_input_is_named(kwargs, message):
    args = {"nemeses": ["pause"], "interval": 5, "duration": 60, "seed": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        plan(args.pop("nemeses"), **args)


def test_the_mix_changes_by_period_and_about_a_quarter_of_the_periods_are_quiet():
    interval, duration = 5, 4000
    steps = plan(["partition", "pause", "kill", "packet-loss"], interval=interval,
                 duration=duration, seed=9)
    length = PERIOD * interval
    periods = int(duration // length)
    kinds = [set() for _ in range(periods + 1)]
    for step in starts(steps):
        kinds[int(step.at // length)].add(step.fault["fault"])
    quiet = [p for p in range(periods) if not kinds[p]]
    assert kinds[0], "the first period is never quiet"
    assert 0.15 * periods <= len(quiet) <= 0.35 * periods, (len(quiet), periods)
    # Mixes differ: some periods use a strict subset of the kinds.
    assert any(0 < len(k) < 4 for k in kinds[:-1])


def test_power_loss_hits_a_majority_or_every_node_and_is_alone():
    steps = plan(["power-loss", "pause", "partition"], interval=4, duration=3000, seed=6)
    losses = [s for s in starts(steps) if s.fault.get("mode") == "lose-unsynced"]
    assert losses and {s.fault["targets"] for s in losses} <= {"majority", "all"}
    assert {s.fault["targets"] for s in losses} == {"majority", "all"}
    for start in losses:
        assert active_at(steps, start.at) == {start.id}
    assert "power-loss" not in {s.fault["fault"] for s in starts(steps)}  # it is a disk fault
