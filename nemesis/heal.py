"""heal-all: every node back to baseline, whatever state it is in.

Run at setup, at the end of the main phase and in the run's `finally`
(also after Ctrl-C). Order matters: the network first (a restarted broker
must reach its controller), then the disk gates (a resumed broker must not
block on a stalled disk), then the processes (resume, restart the dead),
then a wait until the cluster serves again. Idempotent; each step reports
its problems instead of raising, so one failure leaves nothing else
unhealed, and the verdict shows them without hiding the checker result.
"""

from __future__ import annotations

import logging

from cluster.db import Ready
from nemesis import net, process
from nemesis.core import Cluster
from nemesis.disk import fault as disk

log = logging.getLogger("nemesis")


def heal_all(cluster: Cluster, *, ready_timeout: float = 60.0) -> list[str]:
    problems = []
    for step in (net.heal, disk.heal, process.heal):
        try:
            problems += step(cluster)
        except Exception as e:  # noqa: BLE001 — one step failing must not skip the rest
            problems.append(f"{step.__module__}.heal: {type(e).__name__}: {e}")
    if cluster.nodes and isinstance(cluster.db, Ready):
        try:
            cluster.db.wait_ready(ready_timeout)
        except Exception as e:  # noqa: BLE001
            problems.append(f"the cluster is not ready after healing: {e}")
    for problem in problems:
        log.warning("heal: %s", problem)
    return problems
