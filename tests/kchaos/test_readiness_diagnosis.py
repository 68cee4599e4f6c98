"""A cluster that never gets ready says why when the backend can tell: with
the host's FORWARD policy DROP (what dockerd leaves behind) and no rule of
ours for the bridge, the brokers cannot reach the controller, and the run's
setup error names the policy and the rule that fixes it."""

from __future__ import annotations

import os
import subprocess

import pytest

import cluster.local
from cluster.daemon_db import DaemonDB
from kchaos.cluster import SystemUnderTest
from kchaos.config import TestConfig

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]


def test_a_readiness_timeout_names_the_forward_policy(tmp_path, monkeypatch):
    policy = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True,
                            check=True).stdout.splitlines()[0].split()[-1]
    # The rule the backend adds is what is missing here (something else
    # removed it); the brokers, the bridge and the firewall are real.
    monkeypatch.setattr(cluster.local, "allow_forwarding", lambda bridge: None)
    monkeypatch.setattr(DaemonDB, "ready_timeout", 8.0)
    config = TestConfig.build(subnet="198.18.13.0/24", store=tmp_path)
    subprocess.run(["iptables", "-P", "FORWARD", "DROP"], check=True)
    run = SystemUnderTest(config, tmp_path)
    try:
        with pytest.raises(TimeoutError) as failed:
            run.start()
    finally:
        run.teardown()
        subprocess.run(["iptables", "-P", "FORWARD", policy], check=True)
    message = str(failed.value)
    assert "not ready after 8" in message, message
    assert "likely cause: the host's iptables FORWARD policy is DROP" in message, message
    assert "iptables -I FORWARD 1 -i kchaos13-br0 -o kchaos13-br0 -j ACCEPT" in message, message
