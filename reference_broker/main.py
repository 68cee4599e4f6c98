"""The broker's command line, shared by `python -m reference_broker` and
`kchaos broker`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from reference_broker.bugs import describe, parse_bugs
from reference_broker.config import SETTINGS, BrokerConfig, parse_address, parse_settings


def parser(prog: str = "python -m reference_broker") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="The kchaos reference Kafka broker.")
    p.add_argument("--node-id", type=int, required=True, help="this broker's node id")
    p.add_argument("--listen", required=True, metavar="HOST:PORT",
                   help="address to accept clients on")
    p.add_argument("--advertise", metavar="HOST:PORT",
                   help="address clients are told to use (default: --listen)")
    p.add_argument("--data-dir", required=True, type=Path, help="where logs and state live")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a Kafka setting (repeatable): " + ", ".join(sorted(SETTINGS)))
    p.add_argument("--process-roles", default=None, metavar="ROLES",
                   help="broker, controller or broker,controller (default: broker,controller "
                        "without --controller, broker with it)")
    p.add_argument("--controller", metavar="HOST:PORT",
                   help="the controller of a broker-only node")
    p.add_argument("--bug", action="append", default=[], metavar="NAME",
                   help="re-create a historical bug (repeatable; see --list-bugs)")
    p.add_argument("--list-bugs", action="store_true",
                   help="list the bug switches and exit")
    p.add_argument("--log-level", default="INFO",
                   choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                   help="DEBUG logs one line per request")
    return p


def config_from(args: argparse.Namespace) -> BrokerConfig:
    listen = parse_address(args.listen, "--listen")
    advertise = parse_address(args.advertise, "--advertise") if args.advertise else listen
    controller = parse_address(args.controller, "--controller") if args.controller else None
    if args.process_roles is None:
        roles = frozenset({"broker"} if controller else {"broker", "controller"})
    else:
        roles = frozenset(r.strip() for r in args.process_roles.split(","))
    return BrokerConfig(node_id=args.node_id, listen=listen, advertise=advertise,
                        data_dir=args.data_dir, settings=parse_settings(args.config),
                        bugs=parse_bugs(args.bug), process_roles=roles, controller=controller)


def main(argv: list[str] | None = None, prog: str = "python -m reference_broker") -> int:
    p = parser(prog)
    if "--list-bugs" in (sys.argv[1:] if argv is None else argv):
        print(describe())
        return 0
    args = p.parse_args(argv)
    try:
        config = config_from(args)
    except ValueError as e:
        p.error(str(e))
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from reference_broker.node import Node
    from reference_broker.server import serve

    async def run() -> None:
        await serve(Node(config))

    try:
        asyncio.run(run())
    except OSError as e:
        logging.getLogger("reference_broker").error("cannot serve on %s:%d: %s",
                                                    *config.listen, e)
        return 1
    return 0
