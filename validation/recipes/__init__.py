"""Validation recipes: for every bug switch of docs/broker.md, a kchaos test
that shows the switch's anomaly when it is on and is valid when it is off —
the evidence that kchaos finds each historical bug and raises no false
alarm on the correct broker. `kchaos validate` (validation/matrix.py) runs
them.
"""

from __future__ import annotations

from validation.recipes import clients, replication, transactions
from validation.recipes.recipe import Recipe

RECIPES: dict[str, Recipe] = {recipe.switch: recipe
                              for recipe in [*replication.RECIPES, *clients.RECIPES,
                                             *transactions.RECIPES]}
