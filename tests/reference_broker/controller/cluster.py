"""A controller over a fake clock, and brokers registered and unfenced on it."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.controller import Controller


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance_ms(self, ms: float) -> None:
        self.now += ms / 1000


def controller(clock: FakeClock | None = None, **settings) -> Controller:
    return Controller(clock=clock or FakeClock(), **settings)


def join(ctl: Controller, broker_id: int) -> int:
    """Register and unfence one broker; its broker epoch."""
    _, epoch = ctl.register(broker_id, f"b{broker_id}", 9092)
    error, _, fenced = ctl.heartbeat(broker_id, epoch, want_fence=False, caught_up=True)
    assert (error, fenced) == (ErrorCode.none, False)
    return epoch


def running(brokers: int, clock: FakeClock | None = None, **settings
            ) -> tuple[Controller, dict[int, int]]:
    """A controller with brokers 1..n unfenced, and their epochs."""
    ctl = controller(clock, **settings)
    return ctl, {b: join(ctl, b) for b in range(1, brokers + 1)}


def keep_alive(ctl: Controller, epochs: dict[int, int], *brokers: int) -> None:
    for b in brokers:
        error, _, _ = ctl.heartbeat(b, epochs[b], want_fence=False, caught_up=True)
        assert error is ErrorCode.none
