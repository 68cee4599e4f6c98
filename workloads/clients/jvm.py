"""The JVMs the Java client runs in: each a `java` process of its own running
Py4J's GatewayServer with Apache Kafka's jars, driven over a loopback
socket.

A process of its own, not a JVM inside this one (JPype): a crash or hang of
the Java client must end that worker's operations as `info` and never the
run. So every call is bounded (`Jvm.call`): a JVM that does not answer in
time, or whose call broke off, is killed, and one that exited is
reported, all as `JvmGone`.

A JVM serves one client at a time. A client that closed cleanly gives its
JVM back to a pool of idle ones and the next client takes it, so a worker
that replaces its client after every `info` (as a new process) does not
start a JVM each time: starting one, loading a KafkaProducer and its first
metadata took 1.0 to 2.4 s on this 2-core machine beside a running cluster
(load average 6 to 9), a warm JVM's new producer about 0.1 s. A JVM that
was killed or exited is never reused.

The JVMs' own output (the clients' slf4j-simple log, at WARN and above, and
anything the JVM prints) goes into the run's log through logging, one line
at a time; the launch passes --die-on-broken-pipe, so a JVM exits when this
process does.
"""

from __future__ import annotations

import atexit
import collections
import functools
import logging
import os
import select
import signal
import subprocess
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import py4j.java_gateway
import py4j.protocol
from py4j.java_gateway import (CallbackServerParameters, GatewayParameters, JavaGateway,
                               find_jar_path)
from py4j.protocol import Py4JError, Py4JJavaError

from cluster.kafka import dist

log = logging.getLogger("workloads.clients.java")

# The client's heap: a producer or a consumer and its buffers fit in far
# less; a run has several of these beside the brokers and Spark.
JVM_OPTIONS = ("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               # Out of memory, a JVM is dead rather than half-alive.
               "-XX:+ExitOnOutOfMemoryError",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
LAUNCH_TIMEOUT = 30.0   # s: from `java` to the gateway's port, on a loaded machine
IDLE_MAX = 8            # idle JVMs kept for the next clients; more are killed
SAFETY_TIMEOUT = 300.0  # s


# PySpark replaces py4j's answer handler (py4j.java_gateway.get_return_value)
# for every gateway of the process with one that turns a Java exception
# into a Spark one by asking Spark's JVM about it. Asked about our client's
# exception, Spark's JVM fails and the call looked broken: the client's JVM
# was killed and a send that failed was `info`. Our gateways' answers go to
# py4j's own handler; every other gateway's to whatever handler is there.
_PY4J_ANSWER = py4j.protocol.get_return_value
_others_answer = py4j.java_gateway.get_return_value


def _answer(answer, gateway_client, *args, **kwargs):
    if getattr(gateway_client, "kchaos_client", False):
        return _PY4J_ANSWER(answer, gateway_client, *args, **kwargs)
    return _others_answer(answer, gateway_client, *args, **kwargs)


def _answers_to_py4j() -> None:
    """Put _answer in front of the handler installed now (PySpark installs
    its own whenever a Spark context starts, over any other)."""
    global _others_answer
    installed = py4j.java_gateway.get_return_value
    if installed is not _answer:
        _others_answer = installed
        py4j.java_gateway.get_return_value = _answer


class JvmGone(Exception):
    """The JVM exited, or did not answer in time and was killed: what it was
    doing is unknown. str() is the history's error, "<NAME>: <message>"."""


class JvmStartError(Exception):
    """No JVM could be started: nothing was asked of Kafka."""


@functools.cache
def classpath() -> str:
    """Py4J's jar and every jar of Kafka's distribution (kafka-clients and
    its compression and slf4j jars among them). Raises, saying how to fix
    it, when java or the jars are missing."""
    dist.java()
    lib = dist.ensure(dist.DEFAULT_VERSION)
    return os.pathsep.join([find_jar_path(), str(lib / "*")])


def kafka_clients_version() -> str | None:
    """The kafka-clients release the Java client runs, when its jars are
    cached (never fetched from here)."""
    jars = sorted(dist.lib_dir(dist.DEFAULT_VERSION).glob("kafka-clients-*.jar"))
    return jars[0].name.removeprefix("kafka-clients-").removesuffix(".jar") if jars else None


class Jvm:
    """One gateway JVM. `jvm` is Py4J's view of its packages; `cache` holds
    what clients of this JVM build once (a JSON mapper, a listener's port)."""

    def __init__(self):
        argv = [dist.java(), *JVM_OPTIONS, "-cp", classpath(), "py4j.GatewayServer",
                "--die-on-broken-pipe", "--enable-auth", "0"]
        # A session of its own: a terminal's Ctrl-C is the harness's to
        # handle, not every client's.
        try:
            self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            raise JvmStartError(f"JVM_START: {argv[0]}: {e}") from e
        self.pid = self.process.pid
        self._tail: collections.deque[str] = collections.deque(maxlen=5)
        threading.Thread(target=self._log_output, args=(self.process.stderr,),
                         name=f"jvm-{self.pid}-stderr", daemon=True).start()
        try:
            port, token = self._handshake()
        except Exception:
            self.process.kill()
            self.process.wait()
            raise
        # Whatever else the JVM prints, so that a full pipe never blocks it.
        threading.Thread(target=self._log_output, args=(self.process.stdout,),
                         name=f"jvm-{self.pid}-stdout", daemon=True).start()
        # read_timeout: a safety net for the calls Jvm.call does not bound
        # (Py4J releasing a collected Java object), far above every bound.
        self.gateway = JavaGateway(gateway_parameters=GatewayParameters(
            port=port, auth_token=token, auto_convert=True, read_timeout=SAFETY_TIMEOUT))
        self.gateway._gateway_client.kchaos_client = True   # its answers: py4j's own handler
        self.jvm = self.gateway.jvm
        self.cache: dict = {}
        self._runner = ThreadPoolExecutor(1, thread_name_prefix=f"jvm-{self.pid}-call")
        self._lock = threading.Lock()                # kill() once
        self._callbacks_lock = threading.Lock()      # held across Java calls: never by kill()
        self._killed = self._killed_by_us = False
        _every.add(self)

    def _handshake(self) -> tuple[int, str]:
        """The port and auth token the gateway prints once it listens (read
        from the descriptor: a buffered readline could hold the second line
        where select() cannot see it)."""
        deadline = time.monotonic() + LAUNCH_TIMEOUT
        fd, data = self.process.stdout.fileno(), b""
        while data.count(b"\n") < 2:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise JvmStartError(f"JVM_START: the client's JVM (pid {self.pid}) did not "
                                    f"listen within {LAUNCH_TIMEOUT:.0f} s")
            chunk = os.read(fd, 4096)
            if not chunk:
                code = self.process.wait()
                time.sleep(0.2)     # its last words, to the log thread
                raise JvmStartError(f"JVM_START: the client's JVM exited with {code} before "
                                    f"listening: {' | '.join(self._tail) or 'no output'}")
            data += chunk
        port, token, rest = data.split(b"\n", 2)
        for line in rest.decode(errors="replace").splitlines():
            log.info("jvm %d: %s", self.pid, line)
        return int(port), token.decode().strip()

    def _log_output(self, stream) -> None:
        for raw in stream:
            line = raw.decode(errors="replace").rstrip()
            self._tail.append(line)
            log.info("jvm %d: %s", self.pid, line)

    def alive(self) -> bool:
        return not self._killed and self.process.poll() is None

    def call(self, fn, timeout: float):
        """fn() — Py4J calls on this JVM — within `timeout` s. A Java
        exception fn does not catch comes out as Py4JJavaError; a JVM that
        exited, or did not answer in time (killed then), as JvmGone."""
        if not self.alive():
            raise JvmGone(self._why_gone())
        _answers_to_py4j()
        future = self._runner.submit(fn)
        try:
            return future.result(timeout)
        except FutureTimeout:
            self.kill()
            raise JvmGone(f"JVM_UNRESPONSIVE: no answer within {timeout:.1f} s; the client's "
                          f"JVM (pid {self.pid}) was killed") from None
        except Py4JJavaError:
            raise
        except Py4JError as e:
            # A JVM that crashed is exiting: give it a moment to say how.
            try:
                self.process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                # Alive, but the call broke off (a connection lost, a call
                # Py4J itself refused): what the JVM did is unknown.
                log.warning("jvm %d: %r; killing it", self.pid, e)
                self.kill()
                raise JvmGone(f"JVM_ERROR: {str(e).splitlines()[0]}; the client's JVM (pid "
                              f"{self.pid}) was killed") from e
            self.kill()
            raise JvmGone(self._why_gone()) from e

    def _why_gone(self) -> str:
        code = self.process.poll()
        if code is None or self._killed_by_us:
            return (f"JVM_EXITED: the client's JVM (pid {self.pid}) was killed after a call "
                    f"that failed")
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        return (f"JVM_EXITED: the client's JVM (pid {self.pid}) exited ({how})"
                + (f"; its last line: {self._tail[-1]}" if self._tail else ""))

    def callbacks(self) -> None:
        """Start the callback server, once, through which this JVM calls
        Python objects (a consumer's rebalance listener)."""
        with self._callbacks_lock:
            if "callbacks" in self.cache:
                return
            # Without a token: the gateway's callback client, made by its
            # main(), never has one. It listens on loopback and serves only
            # the listeners registered with it; the gateway itself, which
            # runs any Java code asked of it, does require the token.
            self.gateway.start_callback_server(CallbackServerParameters(
                port=0, daemonize=True, daemonize_connections=True))
            # Port 0 chose a free port the JVM has to be told of.
            server = self.gateway.java_gateway_server
            server.resetCallbackClient(server.getCallbackClient().getAddress(),
                                       self.gateway.get_callback_server().get_listening_port())
            self.cache["callbacks"] = True

    def kill(self) -> None:
        with self._lock:
            if self._killed:
                return
            self._killed = True
            self._killed_by_us = self.process.poll() is None
        if self._killed_by_us:
            self.process.kill()
        self.process.wait()
        self._runner.shutdown(wait=False)
        self.gateway.shutdown_callback_server()
        client = self.gateway._gateway_client
        # Not connected: Python proxies of Java objects collected from now on
        # are not released in a JVM that is gone (close() alone keeps it
        # "connected", to reconnect on the next call).
        client.is_connected = False
        client.close()


_idle: list[Jvm] = []
_idle_lock = threading.Lock()
_every: weakref.WeakSet[Jvm] = weakref.WeakSet()


@atexit.register
def _kill_all() -> None:
    """Before the interpreter's teardown collects the Java objects' proxies:
    a gateway still open would try to release each in a JVM that is gone
    (exiting with this process), and log every failure."""
    for jvm in list(_every):
        jvm.kill()


def acquire() -> Jvm:
    """An idle JVM that is still alive, else a new one (JvmStartError if it
    cannot start)."""
    while True:
        with _idle_lock:
            jvm = _idle.pop() if _idle else None
        if jvm is None:
            return Jvm()
        if jvm.alive():
            return jvm
        jvm.kill()          # exited while idle: release its sockets


def release(jvm: Jvm) -> None:
    """Take back the JVM of a client that closed cleanly."""
    if not jvm.alive():
        jvm.kill()
        return
    with _idle_lock:
        if len(_idle) < IDLE_MAX:
            _idle.append(jvm)
            return
    jvm.kill()
