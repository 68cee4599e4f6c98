"""heal-all: every node back to baseline, whatever state it is in.

Run at setup, at the end of the main phase and in the run's `finally`
(also after Ctrl-C). Order matters: the network first (a restarted broker
must reach its controller), then the disk gates (a resumed broker must not
block on a stalled disk), then the processes (resume, restart the dead),
then a wait until the cluster serves again — starting the dead once more
if one died before it did (START_ATTEMPTS). Idempotent; each step reports
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


# A process heal-all started may die once more of what a fault left behind:
# Linux reports a write-back error nobody has seen yet to the next fsync of
# the file, a new process's too (errseq), so a Kafka restarted after disk
# errors halts again on its first flush (msync EIO) and starts cleanly the
# time after. Its deaths are judged apart (kchaos/liveness.py).
START_ATTEMPTS = 2


def heal_all(cluster: Cluster, *, ready_timeout: float = 60.0) -> list[str]:
    problems = []
    for step in (net.heal, disk.heal):
        problems += _step(step, cluster)
    for attempt in range(1, START_ATTEMPTS + 1):
        problems += _step(process.heal, cluster)
        if not (cluster.nodes and isinstance(cluster.db, Ready)):
            break
        try:
            cluster.db.wait_ready(ready_timeout)
            break
        except Exception as e:  # noqa: BLE001
            if attempt == START_ATTEMPTS:
                problems.append(f"the cluster is not ready after healing: {e}")
            else:
                log.warning("heal: not ready (%s); starting what is not running again",
                            str(e).splitlines()[0])
    for problem in problems:
        log.warning("heal: %s", problem)
    return problems


def _step(step, cluster: Cluster) -> list[str]:
    try:
        return step(cluster)
    except Exception as e:  # noqa: BLE001 — one step failing must not skip the rest
        return [f"{step.__module__}.heal: {type(e).__name__}: {e}"]
