"""Host keys: the hosts' keys are checked against one known_hosts file (by
the name the user gave, `[host]:port` off port 22, as OpenSSH does). A key
the file lacks is refused, with the command that adds it, unless the
backend accepts new keys (`--ssh-accept-new-host-keys`): then it is
recorded there, as OpenSSH's StrictHostKeyChecking=accept-new does. A key
that differs from the recorded one is always refused (paramiko raises
BadHostKeyException before it asks a policy), with how to replace it."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import threading

import paramiko

from cluster.ssh_options import HostKeyRejected, SshOptions

log = logging.getLogger("cluster")


def fingerprint(key: paramiko.PKey) -> str:
    """As OpenSSH shows it: SHA256:<base64 of the key's hash, unpadded>."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_hosts_name(host: str, port: int) -> str:
    """How known_hosts names host: bare on port 22, `[host]:port` otherwise."""
    return host if port == 22 else f"[{host}]:{port}"


class RefuseUnknown(paramiko.MissingHostKeyPolicy):
    """Refuse a key known_hosts lacks, saying how to add it."""

    def __init__(self, options: SshOptions, host: str):
        self.options, self.host = options, host

    def missing_host_key(self, client, hostname, key):
        known = self.options.known_hosts_path
        raise HostKeyRejected(
            f"the host key of {hostname} ({key.get_name()} {fingerprint(key)}) is not in "
            f"{known}: check the fingerprint with the host's owner, then add it with "
            f"`ssh-keyscan -p {self.options.port} {self.host} >> {known}`, or pass "
            f"--ssh-accept-new-host-keys (accept_new_host_keys=True) to accept and record it")


_record_lock = threading.Lock()


class RecordUnknown(paramiko.MissingHostKeyPolicy):
    """Accept a key known_hosts lacks and append it there, as OpenSSH's
    StrictHostKeyChecking=accept-new does. A changed key never gets here:
    paramiko refuses it before asking a policy."""

    def __init__(self, options: SshOptions):
        self.options = options

    def missing_host_key(self, client, hostname, key):
        known = self.options.known_hosts_path
        with _record_lock:
            known.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
            fd = os.open(known, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "a") as out:
                out.write(line)
        client.get_host_keys().add(hostname, key.get_name(), key)
        log.warning("accepted the new host key of %s (%s %s) and recorded it in %s",
                    hostname, key.get_name(), fingerprint(key), known)


def changed_key_message(who: str, host: str, options: SshOptions,
                        e: paramiko.BadHostKeyException) -> str:
    name = known_hosts_name(host, options.port)
    known = options.known_hosts_path
    return (f"{who}: the host key of {name} HAS CHANGED: {known} has "
            f"{e.expected_key.get_name()} {fingerprint(e.expected_key)}, the host offers "
            f"{e.key.get_name()} {fingerprint(e.key)}. The host may have been reinstalled, "
            f"or someone may be intercepting the connection; kchaos never accepts a "
            f"changed key. After finding out why, remove the old key with "
            f"`ssh-keygen -f {known} -R '{name}'` and add the new one with "
            f"`ssh-keyscan -p {options.port} {host} >> {known}`")
