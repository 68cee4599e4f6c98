"""Broker registration, epochs, heartbeats and session expiry: a broker
starts fenced, is unfenced once caught up, and is fenced when it asks or
when it has been silent for longer than broker.session.timeout.ms."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.controller import (
    Controller, FenceBroker, PartitionState, RegisterBroker, UnfenceBroker)
from tests.reference_broker.controller.cluster import FakeClock, controller, keep_alive, running

NONE = ErrorCode.none


def test_broker_epoch_is_the_offset_of_the_registration_record():
    ctl = controller()
    records, epoch = ctl.register(1, "host1", 9092)
    assert (records, epoch) == ([RegisterBroker(1, "host1", 9092, 0)], 0)
    ctl.heartbeat(1, 0, want_fence=False, caught_up=True)
    _, epoch2 = ctl.register(2, "host2", 9093)
    assert epoch2 == 2 == ctl.records_since(2)[0].epoch
    assert ctl.image.brokers[2].fenced


def test_registered_broker_stays_fenced_until_caught_up():
    ctl = controller()
    _, epoch = ctl.register(1, "h", 1)
    assert ctl.heartbeat(1, epoch, want_fence=False, caught_up=False) == (NONE, [], True)
    # BrokerLifecycleManager asks to stay fenced until it is ready.
    assert ctl.heartbeat(1, epoch, want_fence=True, caught_up=True) == (NONE, [], True)
    assert ctl.heartbeat(1, epoch, want_fence=False, caught_up=True) == (
        NONE, [UnfenceBroker(1)], False)
    assert ctl.heartbeat(1, epoch, want_fence=False, caught_up=True) == (NONE, [], False)


def test_unfenced_broker_asking_to_be_fenced_is_fenced():
    ctl, epochs = running(1)
    assert ctl.heartbeat(1, epochs[1], want_fence=True, caught_up=True) == (
        NONE, [FenceBroker(1)], True)


def test_stale_or_unknown_broker_epoch():
    ctl, epochs = running(1)
    before = ctl.image.offset
    assert ctl.heartbeat(1, epochs[1] + 1, want_fence=False, caught_up=True) == (
        ErrorCode.stale_broker_epoch, [], True)
    assert ctl.heartbeat(7, 0, want_fence=False, caught_up=True) == (
        ErrorCode.stale_broker_epoch, [], True)
    assert ctl.image.offset == before


def test_silent_broker_is_fenced_after_the_session_timeout_only():
    clock = FakeClock()
    ctl, epochs = running(2, clock, session_timeout_ms=9000)
    clock.advance_ms(5000)
    keep_alive(ctl, epochs, 2)
    clock.advance_ms(4000)
    assert ctl.expire() == []          # exactly the timeout: not yet (last + timeout < now)
    clock.advance_ms(1)
    assert ctl.expire() == [FenceBroker(1)]
    assert ctl.image.brokers[1].fenced and not ctl.image.brokers[2].fenced
    assert ctl.expire() == []          # fenced brokers are not fenced again
    clock.advance_ms(9000)
    assert ctl.expire() == [FenceBroker(2)]


def test_a_stale_heartbeat_does_not_keep_the_session():
    clock = FakeClock()
    ctl, epochs = running(1, clock)
    clock.advance_ms(9001)
    ctl.heartbeat(1, epochs[1] + 5, want_fence=False, caught_up=True)
    assert ctl.expire() == [FenceBroker(1)]


def test_fenced_broker_heartbeating_again_is_unfenced():
    clock = FakeClock()
    ctl, epochs = running(1, clock)
    clock.advance_ms(10_000)
    ctl.expire()
    assert ctl.heartbeat(1, epochs[1], want_fence=False, caught_up=True) == (
        NONE, [UnfenceBroker(1)], False)


def test_reregistering_an_unfenced_broker_fences_the_old_incarnation_first():
    ctl, epochs = running(2)
    ctl.create_topic("t", 1, 2)
    assert ctl.image.partition("t", 0).leader == 1
    records, epoch = ctl.register(1, "h", 1)
    assert records == [PartitionState("t", 0, (1, 2), (2,), 2, 1, 1), FenceBroker(1),
                       RegisterBroker(1, "h", 1, epoch)]
    assert epoch == ctl.image.offset - 1
    assert ctl.heartbeat(1, epochs[1], want_fence=False, caught_up=True)[0] is \
        ErrorCode.stale_broker_epoch
    # Registering again while fenced: no fencing needed, just a new epoch.
    records, again = ctl.register(1, "h", 1)
    assert records == [RegisterBroker(1, "h", 1, again)] and again == epoch + 1


def test_controller_restart_gives_every_broker_a_fresh_session():
    clock = FakeClock()
    ctl, _ = running(2, clock)
    clock.advance_ms(8000)
    restarted = Controller(ctl.records_since(0), clock=clock)
    clock.advance_ms(8000)
    assert restarted.expire() == []     # 16 s since the last heartbeat, 8 s since restart
    clock.advance_ms(1001)
    assert restarted.expire() == [FenceBroker(1), FenceBroker(2)]
