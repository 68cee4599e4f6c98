"""Is a Kafka cluster ready for clients, and who leads a partition? Asked
the way a client would: a Metadata request (confluent-kafka's AdminClient)
must list the expected brokers — registered and unfenced — and a leader
for every partition."""

from __future__ import annotations

import socket
import threading
import time

# How long past its own timeout a lookup may take before its caller stops
# waiting for it (bounded).
DESTROY_GRACE = 5.0


def bounded(ask, timeout: float, otherwise):
    """ask() in a thread of its own; `otherwise` if it has not returned
    within timeout + DESTROY_GRACE. Each lookup closes its AdminClient
    (admin_client), and librdkafka's destroy waits for its broker threads: while
    brokers were being killed, one such destroy held a nemesis in a
    coordinator lookup for over 120 s, and the faults after it were never
    applied. The thread is a daemon, so one that stays stuck ends with the
    process."""
    box = []
    worker = threading.Thread(target=lambda: box.append(ask()), name="kchaos-admin-lookup",
                              daemon=True)
    worker.start()
    worker.join(timeout + DESTROY_GRACE)
    return box[0] if box else otherwise


def admin_client(bootstrap: str, **settings):
    """An AdminClient to use in a `with` block, which closes it in the
    caller's thread. Left to the garbage collector it can end up destroyed
    in librdkafka's background thread, and librdkafka aborts the process
    then ("calling rd_kafka_destroy() from librdkafka owned thread is
    prohibited"): a future that failed holds its exception, whose traceback
    holds the frame that held the client, so the client sits in a
    reference cycle until a collection runs, possibly inside the result
    callback librdkafka runs on its own thread (confluent-kafka-python
    #2129, #2131)."""
    from confluent_kafka.admin import AdminClient
    # log_level 2: connection errors while brokers come up or are faulted
    # are expected; the caller's timeout says what went wrong.
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000,
                        "log_level": 2, **settings})


def metadata_problem(bootstrap: str, brokers: set[int], timeout: float, *,
                     addresses: set[str] = frozenset()) -> str | None:
    """None when Metadata lists every broker in `brokers` (node ids) and one
    advertised at each host of `addresses`, and every partition has a
    leader; otherwise what is still missing."""
    return bounded(lambda: _metadata_problem(bootstrap, brokers, addresses, timeout), timeout,
                   f"no answer within {timeout + DESTROY_GRACE:.0f} s (the admin client hung)")


def _metadata_problem(bootstrap: str, brokers: set[int], addresses: set[str],
                      timeout: float) -> str | None:
    try:
        with admin_client(bootstrap, **{"reconnect.backoff.max.ms": 500}) as admin:
            meta = admin.list_topics(timeout=timeout)
    except Exception as e:  # noqa: BLE001 — KafkaException while brokers come up
        return f"metadata failed: {e}"
    leaderless = [f"{t.topic}-{p.id}" for t in meta.topics.values()
                  for p in t.partitions.values() if p.leader < 0]
    listed = [b.host for b in meta.brokers.values()]
    missing = sorted(brokers - set(meta.brokers)) + sorted(
        a for a in addresses if not any(same_host(a, host) for host in listed))
    if not missing and not leaderless:
        return None
    return (f"brokers not registered or fenced: {missing}; "
            f"partitions without a leader: {leaderless[:10]}")


def same_host(a: str, b: str) -> bool:
    """Whether two host names or addresses are one host (a broker may
    advertise a name where kchaos knows the node by its address)."""
    if a == b:
        return True
    try:
        return socket.gethostbyname(a) == socket.gethostbyname(b)
    except OSError:
        return False


def broker_hosts(bootstrap: str, timeout: float = 5.0) -> dict[int, str] | None:
    """Metadata's brokers: node id -> the host each advertises (None: no
    answer within timeout)."""
    return bounded(lambda: _broker_hosts(bootstrap, timeout), timeout, None)


def _broker_hosts(bootstrap: str, timeout: float) -> dict[int, str] | None:
    try:
        with admin_client(bootstrap) as admin:
            meta = admin.list_topics(timeout=timeout)
    except Exception:  # noqa: BLE001 — KafkaException: nobody knows
        return None
    return {broker_id: b.host for broker_id, b in meta.brokers.items()}


def partition_state(bootstrap: str, topic: str, partition: int,
                    timeout: float = 5.0) -> tuple[int | None, list[int]] | None:
    """(leader node id or None, ISR node ids) of topic-partition by
    Metadata; None when no broker answered within timeout."""
    return bounded(lambda: _partition_state(bootstrap, topic, partition, timeout), timeout, None)


def _partition_state(bootstrap: str, topic: str, partition: int,
                     timeout: float) -> tuple[int | None, list[int]] | None:
    try:
        with admin_client(bootstrap) as admin:
            meta = admin.list_topics(topic=topic, timeout=timeout)
        state = meta.topics[topic].partitions[partition]
    except Exception:  # noqa: BLE001 — KafkaException, KeyError: nobody knows
        return None
    return (state.leader if state.leader >= 0 else None), list(state.isrs)


def group_coordinator_id(bootstrap: str, group: str, timeout: float = 5.0) -> int | None:
    """The node id coordinating `group`, as FindCoordinator answers it (the
    group need not exist yet: its coordinator is fixed by its name); None
    when nobody answered within timeout."""
    return bounded(lambda: _group_coordinator_id(bootstrap, group, timeout), timeout, None)


def _group_coordinator_id(bootstrap: str, group: str, timeout: float) -> int | None:
    try:
        with admin_client(bootstrap) as admin:
            future = admin.describe_consumer_groups([group], request_timeout=timeout)[group]
            # A second longer than the request's own timeout: the request
            # has ended (answered or failed) when the client is closed, so
            # the close does not wait for it.
            return future.result(timeout=timeout + 1).coordinator.id
    except Exception:  # noqa: BLE001 — KafkaException, a timeout: nobody knows
        return None


def wait_for_coordinators(bootstrap: str, groups: list[str], timeout: float) -> None:
    """Until FindCoordinator answers for every group (TimeoutError naming
    those without one). Kafka creates `__consumer_offsets` (50 partitions
    by default) on the first FindCoordinator, which takes seconds: a run
    asks before its workload starts, so its first seconds are not spent on
    COORDINATOR_NOT_AVAILABLE."""
    deadline = time.monotonic() + timeout
    waiting = list(groups)
    while waiting and time.monotonic() < deadline:
        waiting = [g for g in waiting if group_coordinator_id(
            bootstrap, g, min(5.0, max(0.5, deadline - time.monotonic()))) is None]
        if waiting:
            time.sleep(0.2)
    if waiting:
        raise TimeoutError(f"no coordinator for groups {waiting} from {bootstrap} after "
                           f"{timeout} s (FindCoordinator)")
