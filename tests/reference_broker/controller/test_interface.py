"""`Controller` implements `MetadataQuorum` call for call, so the broker can
program against the interface and a Raft quorum can take its place."""

from __future__ import annotations

import inspect

from reference_broker.controller import Controller, MetadataQuorum


def test_controller_has_every_quorum_method_with_the_same_signature():
    methods = [name for name, value in vars(MetadataQuorum).items()
               if inspect.isfunction(value) and not name.startswith("_")]
    assert sorted(methods) == ["alter_partition", "alter_topic_configs", "create_cluster",
                               "create_topic", "delete_topic", "expire", "heartbeat",
                               "records_since", "register"]
    for name in methods:
        assert inspect.signature(getattr(Controller, name)) == \
            inspect.signature(getattr(MetadataQuorum, name)), name
