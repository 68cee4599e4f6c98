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
these nodes clears them — or `kchaos clean RUN_DIR` (`clean_run_dir`)
stops them and removes what the run made (namespaces, the bridge and its
forwarding rule, containers and networks), from any state, as often as
asked.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from kchaos.config import TestConfig
from kchaos.processes import processes
from cluster.local import LocalNode


def heal_run_dir(run_dir: Path) -> tuple[list[str], list[str]]:
    """(what was done, problems) for the run in run_dir."""
    from cluster.local import namespaces
    from kchaos.cluster import SCRATCH, make_backend
    from nemesis.disk.fault import unmount_all
    from nemesis.net import heal_nodes

    config = _config(run_dir)
    if config.db == "external" and not config.has_nodes():
        return ["an external cluster: kchaos injected no faults into it"], []
    if config.node_backend() != "local":
        return _heal_remote(config, run_dir)
    scratch = run_dir / SCRATCH
    backend = make_backend(config, run_dir)
    done, problems = [], []
    nodes = backend.nodes
    if backend.namespaced:
        present = set(namespaces())
        alive = [n for n in nodes if n.netns in present]
        problems += heal_nodes(alive)
        if alive:
            done.append(f"firewall chains removed in {', '.join(n.netns for n in alive)}")
        if len(alive) < len(nodes):
            gone = ", ".join(n.name for n in nodes if n not in alive)
            done.append(f"no namespace left for {gone} (no rules to remove)")
        # Gates are mounted in the host's mount namespace (nemesis.disk.fault),
        # which outlives a node's network namespace: reach them from here.
        nodes = [n if n in alive else LocalNode(n.name, n.address, n.workdir) for n in nodes]
    continued = continue_processes(str(scratch))
    done.append(f"{len(continued)} process(es) continued (SIGCONT)")
    problems += unmount_all(nodes)
    done.append("disk gates unmounted")
    return done, problems


def _heal_remote(config: TestConfig, run_dir: Path) -> tuple[list[str], list[str]]:
    """Docker or ssh nodes: found again by the backend (containers by the
    run's label, hosts by name); their chains removed, every daemon of
    ours continued, disk gates unmounted."""
    import signal as signals

    from kchaos.cluster import make_backend
    from nemesis.disk.fault import unmount_all
    from nemesis.net import heal_nodes
    backend = make_backend(config, run_dir)
    nodes = backend.reattach()
    if not nodes:
        return ["no node of this run is left (nothing to heal)"], []
    names = ", ".join(n.name for n in nodes)
    problems = heal_nodes(nodes)
    done = [f"firewall chains removed on {names}"]
    for node in nodes:
        try:
            node.signal_all(signals.SIGCONT)
        except Exception as e:  # noqa: BLE001 — reported; the next node is still healed
            problems.append(f"{node.name}: continuing its daemons: {e}")
    done.append(f"daemons continued (SIGCONT) on {names}")
    problems += unmount_all(nodes)
    done.append("disk gates unmounted")
    return done, problems


def clean_run_dir(run_dir: Path) -> tuple[list[str], list[str]]:
    """(what was done, problems): heal, then stop and remove everything the
    run in run_dir started or made. An external cluster keeps running."""
    from kchaos.cluster import SCRATCH, make_backend
    from nemesis.disk.fault import unmount_all
    done, problems = heal_run_dir(run_dir)
    config = _config(run_dir)
    if config.db == "external":
        return done, problems
    backend = make_backend(config, run_dir)
    kind = config.node_backend()
    if kind == "local":
        scratch = run_dir / SCRATCH
        problems += unmount_all([LocalNode(n.name, n.address, n.workdir) for n in backend.nodes])
        killed = kill_processes(str(scratch))
        backend.teardown()      # namespaces (and what runs in them), veths, bridge, rule
        done.append(f"{len(killed)} process(es) stopped; namespaces, links and the "
                    f"forwarding rule of {backend.prefix} removed")
    else:
        # Docker (containers found by the run's label) or ssh hosts: the
        # gates unmounted, every daemon of ours stopped, then the backend's
        # own teardown (the containers and network removed; connections closed).
        nodes = backend.reattach()
        problems += unmount_all(nodes)
        for node in nodes:
            try:
                node.stop_all()
            except Exception as e:  # noqa: BLE001 — reported; the next node is still cleaned
                problems.append(f"{node.name}: stopping its daemons: {e}")
        backend.teardown()
        done.append(f"daemons stopped on {len(nodes)} node(s); the {kind} backend torn down")
    return done, problems


def _config(run_dir: Path) -> TestConfig:
    test_json = run_dir / "test.json"
    if not test_json.is_file():
        raise FileNotFoundError(f"{run_dir}: no test.json here; pass a run directory "
                                f"(store/<name>/<time>/)")
    return TestConfig.from_json(json.loads(test_json.read_text())["config"])


def kill_processes(marker: str) -> list[int]:
    """SIGCONT and SIGKILL every process whose command line contains marker."""
    killed = []
    for pid in continue_processes(marker):
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except ProcessLookupError:
            pass
    return killed


def continue_processes(marker: str) -> list[int]:
    """SIGCONT every process whose command line contains marker."""
    continued = []
    for pid, _, cmdline in processes():
        if marker in cmdline:
            try:
                os.kill(pid, signal.SIGCONT)
                continued.append(pid)
            except ProcessLookupError:
                pass
    return continued
