"""The firewall kchaos owns on a node: one iptables chain, `KCHAOS`, in the
node's network namespace, reached by a jump at the top of INPUT.

A network fault is a set of DROP rules in that chain, each tagged with the
fault's id (`-m comment --comment <tag>`), so two faults active at once (a
partition and packet loss) come out one at a time; removing the chain
removes every fault, whatever a crashed run left. Nothing else is touched:
other chains, and the rules of INPUT that are not our jump, stay as they are.

Rules match on INPUT only, by source address: a node drops what it receives
from the nodes it holds a grudge against (Jepsen's approach). Dropped there,
a packet is lost silently, as on a real network; a DROP on OUTPUT would fail
the sender's own send() with EPERM instead. A cut in both directions is a
rule on each side. Clients live in the root namespace and reach nodes from
the bridge address, which no rule names.

Each change to a node's rules is one `iptables-restore --noflush`
transaction, computed from a listing (`iptables -S`) of the node's filter
table: it applies whole or not at all, so a failed start leaves no half
grudge behind.
"""

from __future__ import annotations

import shlex
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from cluster.node import CommandError, Node
from nemesis.core import FaultError

CHAIN = "KCHAOS"

# A transaction deletes rules by their number in the listing it was computed
# from; no other thread may change the chain in between.
_lock = threading.Lock()


class FirewallMissing(FaultError):
    """iptables cannot run on the node (not installed, or the namespace is
    gone): no rule of ours can be there either."""


def check_own_network(nodes: Sequence[Node]) -> None:
    """FaultError unless every node has a network namespace of its own: on
    the host network, iptables would change the host's firewall."""
    shared = [node.name for node in nodes if getattr(node, "own_network", False) is not True]
    if shared:
        raise FaultError(f"nodes {shared} share the host's network: network faults need "
                         f"network namespaces (run as root, without --no-namespaces)")


@dataclass
class _Listing:
    """What `iptables -S` shows of ours in a node's filter table."""
    chain: bool = False
    jumps: list[str] = field(default_factory=list)      # "-A INPUT -j KCHAOS" lines
    rules: list[str] = field(default_factory=list)      # "-A KCHAOS ..." lines, in order


def _run(node: Node, argv: list[str], script: str | None = None) -> str:
    try:
        return node.run(argv, timeout=30.0,
                        input=None if script is None else script.encode()).stdout
    except FileNotFoundError as e:
        raise FirewallMissing(f"on {node.name}: {argv[0]} is not installed ({e}): "
                              f"apt-get install iptables") from None
    except OSError as e:
        raise FaultError(f"on {node.name}: {shlex.join(argv)} could not start: {e}") from None
    except subprocess.TimeoutExpired:
        raise FaultError(f"on {node.name}: {shlex.join(argv)} did not finish in 30 s "
                         f"(the xtables lock held by another process?)") from None
    except CommandError as e:
        # A missing program: 127 from a shell or docker exec; `ip netns exec`
        # says it in words, also when the namespace itself is gone, and so
        # does docker for a stopped container (its namespace went with it).
        stderr = e.stderr or ""
        if e.returncode == 127 or stderr.startswith(("exec of", "Cannot open network namespace")) \
                or "is not running" in stderr:
            raise FirewallMissing(f"{e}: is iptables installed on {node.name} (apt-get "
                                  f"install iptables) and does the node exist?") from None
        detail = f"; the transaction was:\n{script}" if script else ""
        raise FaultError(f"{e}{detail}") from None


def _list(node: Node) -> _Listing:
    listing = _Listing()
    for line in _run(node, ["iptables", "-w", "-S"]).splitlines():
        words = line.split()
        if words == ["-N", CHAIN]:
            listing.chain = True
        elif words[:2] == ["-A", CHAIN]:
            listing.rules.append(line)
        elif words[:1] == ["-A"] and words[-2:] == ["-j", CHAIN]:
            listing.jumps.append(line)
    return listing


def _restore(node: Node, commands: list[str]) -> None:
    script = "\n".join(["*filter", *commands, "COMMIT", ""])
    _run(node, ["iptables-restore", "-w", "--noflush"], script)


def tag_of(rule: str) -> str | None:
    """The comment of a listed rule: the id of the fault that added it."""
    words = shlex.split(rule)
    return words[words.index("--comment") + 1] if "--comment" in words else None


def add_drops(node: Node, tag: str, matches: Sequence[Sequence[str]]) -> None:
    """Append to our chain on node one DROP rule per match (iptables match
    arguments, e.g. ["-s", "198.18.0.12"]), tagged with tag; creates the
    chain and its jump first when missing."""
    check_own_network([node])
    with _lock:
        listing = _list(node)
        commands = [] if listing.chain else [f"-N {CHAIN}"]
        if not listing.jumps:
            # First in INPUT: an ACCEPT of someone else's earlier in the
            # chain would let the packets we drop through.
            commands.append(f"-I INPUT 1 -j {CHAIN}")
        commands += [shlex.join(["-A", CHAIN, *match, "-m", "comment", "--comment", tag,
                                 "-j", "DROP"]) for match in matches]
        _restore(node, commands)


def remove_tagged(node: Node, tag: str) -> list[str]:
    """Delete the rules tagged tag from our chain on node; the rules removed
    (as `iptables -S` showed them)."""
    with _lock:
        listing = _list(node)
        numbered = [(number, rule) for number, rule in enumerate(listing.rules, start=1)
                    if tag_of(rule) == tag]
        if numbered:
            # From the last up, so the numbers still to delete stay valid.
            _restore(node, [f"-D {CHAIN} {number}" for number, _ in reversed(numbered)])
        return [rule for _, rule in numbered]


def remove_chain(node: Node) -> int:
    """Delete our jumps, then flush and delete our chain on node; how many
    rules the chain held. Nothing to do is fine (heal twice, or a node that
    never had a fault)."""
    with _lock:
        listing = _list(node)
        commands = ["-D" + jump.removeprefix("-A") for jump in listing.jumps]
        if listing.chain:
            commands += [f"-F {CHAIN}", f"-X {CHAIN}"]
        if commands:
            _restore(node, commands)
        return len(listing.rules)
