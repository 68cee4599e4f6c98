"""The disk gate's command line.

    python -m nemesis.disk serve BACKING MOUNTPOINT --control SOCKET [--writeback-delay S]
    python -m nemesis.disk ctl SOCKET COMMAND [--timeout S]

`serve` mounts the gate on MOUNTPOINT over BACKING and serves it in the
foreground until SIGTERM/SIGINT (or `ctl ... shutdown`): then it lets
stalled operations through, writes everything back, unmounts (lazily: a
process with a file open keeps a detached mount alive for up to
SHUTDOWN_GRACE seconds, then the gate exits and that process sees errors)
and removes its socket. A SIGKILLed gate leaves a dead mount ("Transport
endpoint is not connected") with exactly what was written back in BACKING:
`nemesis.disk.fault.unmount_all` clears it.

`ctl` sends one command (control.COMMANDS) and prints the gate's JSON
answer. Exit status: 0 done, 1 the gate refused (unknown command, an
error), 3 no gate socket at SOCKET, 4 a socket but no answer (a dead gate,
a timeout).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import threading

from nemesis.disk.control import COMMANDS, ControlServer, GateUnreachable, request

log = logging.getLogger("nemesis.disk")

SHUTDOWN_GRACE = 5.0
EXIT_REFUSED, EXIT_NO_GATE, EXIT_NO_ANSWER = 1, 3, 4


def lazy_unmount(mountpoint: str) -> bool:
    """Detach mountpoint (fusermount3 -u -z, else umount -l); whether it worked."""
    for argv in (["fusermount3", "-u", "-z", mountpoint], ["umount", "-l", mountpoint]):
        try:
            if subprocess.run(argv, capture_output=True, timeout=30).returncode == 0:
                return True
        except FileNotFoundError:
            continue
    return False


def serve(args: argparse.Namespace) -> int:
    # Signals go to one thread of ours, never to libfuse's workers (which
    # would only set a flag they check between requests).
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
    os.umask(0)     # the kernel already applied the caller's umask to every mode
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s disk gate: %(message)s")
    from nemesis.disk.gate import DiskGate, serve as serve_gate
    from nemesis.disk.page_cache import PageCache

    backing, mountpoint = os.path.abspath(args.backing), os.path.abspath(args.mountpoint)
    for name, path in (("BACKING", backing), ("MOUNTPOINT", mountpoint)):
        if not os.path.isdir(path):
            print(f"{name}={path!r} is not a directory: create it first (mkdir -p)",
                  file=sys.stderr)
            return 2
    cache = PageCache(args.writeback_delay)
    gate = DiskGate(backing, cache)
    switches = gate.switches
    finished = threading.Event()

    def handle(command: str) -> dict:
        if command in ("stall", "unstall"):
            switches.set_stalled(command == "stall")
        elif command in ("errors", "stop-errors"):
            switches.set_failing(command == "errors")
        elif command == "heal":
            switches.set_stalled(False)
            switches.set_failing(False)
        elif command == "drop":
            dropped = gate.drop()
            return {"dropped_files": dropped["files"], "dropped_bytes": dropped["bytes"],
                    **gate.status()}
        elif command == "sync":
            synced = cache.sync()
            return {"synced_files": synced["files"], "synced_bytes": synced["bytes"],
                    **gate.status()}
        elif command == "shutdown":
            threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGTERM)).start()
        elif command != "status":
            raise ValueError(f"unknown command {command!r}: one of {', '.join(COMMANDS)}")
        if command != "status":
            log.info("%s", command)
        return gate.status()

    def on_signal() -> None:
        sig = signal.sigwait({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
        log.info("%s: writing back and unmounting", signal.Signals(sig).name)
        switches.shutdown()
        try:
            cache.sync()
        except OSError as e:
            log.error("writing back before unmounting failed: %s", e)
        if not lazy_unmount(mountpoint):
            log.error("could not unmount %s", mountpoint)
        if not finished.wait(SHUTDOWN_GRACE):
            log.warning("files still open on %s after %s s: exiting anyway", mountpoint,
                        SHUTDOWN_GRACE)
            try:
                cache.sync()    # what they wrote since
            finally:
                os._exit(0)

    server = ControlServer(args.control, handle)
    server.start()
    threading.Thread(target=on_signal, name="signals", daemon=True).start()
    cache.start_writeback()
    log.info("serving %s on %s (writeback delay %s s), control %s", backing, mountpoint,
             args.writeback_delay, args.control)
    try:
        serve_gate(gate, mountpoint)
    except RuntimeError as e:
        log.error("mounting on %s failed: %s", mountpoint, e)
        return 1
    finally:
        cache.stop_writeback()
        switches.shutdown()
        try:
            cache.sync()
        finally:
            server.close()
            finished.set()
    log.info("unmounted %s", mountpoint)
    return 0


def ctl(args: argparse.Namespace) -> int:
    try:
        answer = request(args.socket, args.command, timeout=args.timeout)
    except GateUnreachable as e:
        print(e, file=sys.stderr)
        return EXIT_NO_GATE if not os.path.exists(args.socket) else EXIT_NO_ANSWER
    except OSError as e:
        print(f"the disk gate at {args.socket} did not answer {args.command!r}: {e}",
              file=sys.stderr)
        return EXIT_NO_ANSWER
    print(json.dumps(answer))
    if not answer.get("ok"):
        print(f"the disk gate refused {args.command!r}: {answer.get('error')}", file=sys.stderr)
        return EXIT_REFUSED
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nemesis.disk",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    serving = sub.add_parser("serve", help="mount a gate and serve it in the foreground")
    serving.add_argument("backing", help="the directory the gate passes through to")
    serving.add_argument("mountpoint", help="where the gate is mounted")
    serving.add_argument("--control", required=True, metavar="SOCKET",
                         help="unix socket the gate takes commands on")
    serving.add_argument("--writeback-delay", type=float, default=5.0, metavar="S",
                         help="seconds a change stays unsynced before it is written back "
                              "(default 5; 0 writes through)")
    control = sub.add_parser("ctl", help="send one command to a gate")
    control.add_argument("socket")
    control.add_argument("command", choices=COMMANDS)
    control.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    if args.verb == "serve" and args.writeback_delay < 0:
        parser.error("--writeback-delay: seconds, 0 or more")
    return serve(args) if args.verb == "serve" else ctl(args)


if __name__ == "__main__":
    sys.exit(main())
