"""Where nodes live on a network of their own: the subnet they get
addresses in (.11, .12, ... for n1, n2, ...) and the prefix that names the
namespaces, interfaces, networks and containers of one run. Shared by the
local and docker backends."""

from __future__ import annotations

import ipaddress
import re
import shutil
import subprocess

# The local backend's default (and `kchaos run`'s): the first /24 of
# 198.18.0.0/15, the block RFC 2544 reserves for benchmarking networks.
DEFAULT_SUBNET = "198.18.0.0/24"
MAX_IFNAME = 15                     # Linux interface names hold 15 characters
_PREFIX = re.compile(r"[a-z][a-z0-9-]*")


def prefix_for(subnet: str) -> str:
    """The names of a run's namespaces and links, from its subnet: setup
    removes whatever exists under its prefix (a crashed run's leftovers),
    so runs at the same time on one machine need different subnets, and
    get different prefixes from them — `kchaos` for 198.18.0.0/24,
    `kchaos<third octet>` for the others."""
    third = ipaddress.IPv4Network(subnet).network_address.packed[2]
    return "kchaos" if third == 0 else f"kchaos{third}"


def node_subnet(subnet: str, node_count: int) -> ipaddress.IPv4Network:
    """subnet as a network that holds node_count node addresses from .11
    on, below its broadcast address; ValueError naming the fix otherwise."""
    if not isinstance(node_count, int) or node_count < 1:
        raise ValueError(f"node_count={node_count!r}: a cluster needs at least one node")
    try:
        network = ipaddress.IPv4Network(subnet)
    except ValueError as e:
        raise ValueError(f"subnet={subnet!r}: {e}; pass an IPv4 network such as "
                         f"{DEFAULT_SUBNET!r}") from None
    if node_count + 12 > network.num_addresses:
        raise ValueError(f"subnet={subnet!r} holds no {node_count} node addresses from "
                         f".11 on: pass a larger subnet")
    return network


def node_address(network: ipaddress.IPv4Network, i: int) -> str:
    """Node n<i>'s address (i from 1)."""
    return str(network.network_address + 10 + i)


def check_prefix(prefix: str, longest_suffix: str, names: str) -> None:
    """prefix + longest_suffix must be an interface name."""
    if not _PREFIX.fullmatch(prefix) or len(prefix + longest_suffix) > MAX_IFNAME:
        raise ValueError(f"prefix={prefix!r}: names {names}; use lowercase letters, digits "
                         f"and '-', at most {MAX_IFNAME - len(longest_suffix)} characters")


def overlapping(network: ipaddress.IPv4Network) -> str | None:
    """The host interface with an address in network ("198.18.0.1/24 on
    kchaos-br0"), or None: two bridges with addresses in one subnet would
    split its routes, and docker checks only its own networks."""
    if shutil.which("ip") is None:
        return None
    listing = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True,
                             text=True, timeout=30).stdout
    for line in listing.splitlines():
        fields = line.split()
        interface = ipaddress.IPv4Interface(fields[3])
        if interface.network.overlaps(network):
            return f"{interface} on interface {fields[1]}"
    return None
