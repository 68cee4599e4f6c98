"""`kchaos heal RUN_DIR`: heal-all by hand, for a run whose harness died
(SIGKILL, a power cut of the control machine) with faults in place.

The dead harness's in-memory state is gone, so everything is found again
from the run directory: test.json says how many nodes on which backend,
the node names give the network namespaces whose firewall chain is
flushed (a namespace that is gone, after a reboot of the machine, holds
no rules), processes whose command line names the run's scratch directory
are continued (SIGCONT), and disk gates mounted under it are unmounted
(their brokers then see errors rather than a stall). Nothing is started or
stopped: the brokers that survived keep running until the next run on
these nodes clears them.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from kchaos.config import TestConfig


def heal_run_dir(run_dir: Path) -> tuple[list[str], list[str]]:
    """(what was done, problems) for the run in run_dir."""
    from cluster.local import LocalBackend, LocalNode, namespaces, prefix_for
    from nemesis.disk.fault import unmount_all
    from nemesis.net import heal_nodes

    test_json = run_dir / "test.json"
    if not test_json.is_file():
        raise FileNotFoundError(f"{run_dir}: no test.json here; pass a run directory "
                                f"(store/<name>/<time>/)")
    config = TestConfig.from_json(json.loads(test_json.read_text())["config"])
    if config.db != "reference":
        return ["an external cluster: kchaos injected no faults into it"], []
    scratch = run_dir / "scratch"
    backend = LocalBackend(config.nodes, scratch, subnet=config.subnet,
                           use_namespaces=config.use_namespaces, prefix=prefix_for(config.subnet))
    done, problems = [], []
    nodes = backend.nodes
    if backend.namespaced:
        present = set(namespaces())
        alive = [n for n in nodes if n.netns in present]
        problems += heal_nodes(alive)
        if alive:
            done.append(f"firewall chains removed in {', '.join(n.netns for n in alive)}")
        if len(alive) < len(nodes):
            done.append(f"no namespace left for {', '.join(n.name for n in nodes if n not in alive)}"
                        f" (no rules to remove)")
        # Gates are mounted in the host's mount namespace (nemesis.disk.fault),
        # which outlives a node's network namespace: reach them from here.
        nodes = [n if n in alive else LocalNode(n.name, n.address, n.workdir) for n in nodes]
    continued = continue_processes(str(scratch))
    done.append(f"{len(continued)} process(es) continued (SIGCONT)")
    problems += unmount_all(nodes)
    done.append("disk gates unmounted")
    return done, problems


def continue_processes(marker: str) -> list[int]:
    """SIGCONT every process whose command line contains marker."""
    continued = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline:
            try:
                os.kill(int(proc.name), signal.SIGCONT)
                continued.append(int(proc.name))
            except ProcessLookupError:
                pass
    return continued
