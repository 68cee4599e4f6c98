"""Recipes for the transactional bug switches (issue 31's catalogue in
docs/broker.md): the workload's transactional producers (`transactions`),
half of whose transactions abort, under read_committed consumers."""

from __future__ import annotations

from validation.recipes.recipe import Recipe

RECIPES: list[Recipe] = [
    Recipe(
        switch="lso-inclusive",
        expected=frozenset({"aborted-read", "precommitted-read"}),
        config=dict(time_limit=20, transactions=True, abort_probability=0.5,
                    consumer_mode="assign", recovery_time=3, final_time_limit=30),
        why="No fault is needed: consumers poll at the tail, so a read_committed fetch "
            "often meets a transaction still open, and the inclusive bound hands them its "
            "first record; half the transactions then abort, and that read is an aborted "
            "read (the record of a transaction that failed).",
    ),
]
