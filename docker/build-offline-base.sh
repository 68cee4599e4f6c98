#!/bin/sh
# The base of the kchaos node image where no image registry is reachable:
# Debian bookworm from the mirror this machine's apt already uses (debootstrap,
# minbase),
# imported into Docker as IMAGE (default kchaos-offline-base:bookworm, the
# name cluster/docker_image.py uses). It already holds every package the
# node Dockerfile wants, so building on it needs no network at all.
#
#   sh docker/build-offline-base.sh [IMAGE]
#
# Idempotent: does nothing when IMAGE exists with today's package list (its
# io.kchaos.packages label); an image of an older list is rebuilt. Needs root, debootstrap and a
# running Docker daemon. MIRROR overrides the Debian mirror; without it the
# first Debian archive in /etc/apt (deb822 .sources or one-line .list) is
# used, so the repository names no mirror of its own.
set -eu

IMAGE="${1:-kchaos-offline-base:bookworm}"
apt_mirror() {
    # deb822: "URIs: <uri>" lines; one-line: "deb [opts] <uri> <suite> ...".
    # The archive proper, not -security or -updates, whose paths differ.
    { cat /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | sed -n 's/^URIs:[[:space:]]*//p' | tr ' ' '\n'
      cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
        | sed -n 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]*\).*/\2/p'
    } | grep -E '/debian/?$' | head -1
}
MIRROR="${MIRROR:-$(apt_mirror)}"
if [ -z "$MIRROR" ]; then
    echo "no Debian archive found in /etc/apt: set MIRROR=<url of a Debian mirror>" >&2
    exit 1
fi
# Python 3.11 with venv for the node's own venv, and the node's tools:
# iptables (partitions), fuse3 (the disk gate), procps/iproute2 (pgrep, ss),
# util-linux (setsid, mountpoint), openssh-server (the ssh backend), and a
# Java runtime for Apache Kafka (--db kafka; its jars are copied in at run time).
PACKAGES="python3,python3-venv,iptables,fuse3,libfuse3-3,procps,iproute2,util-linux,openssh-server,ca-certificates,openjdk-17-jre-headless"

if [ "$(docker image inspect -f '{{index .Config.Labels "io.kchaos.packages"}}' "$IMAGE" \
        2>/dev/null)" = "$PACKAGES" ]; then
    echo "offline base $IMAGE exists"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "building the offline base $IMAGE needs root (debootstrap): run as root" >&2
    exit 1
fi
if ! command -v debootstrap >/dev/null 2>&1; then
    echo "debootstrap is not installed: apt-get install debootstrap" >&2
    exit 1
fi

root="$(mktemp -d /tmp/kchaos-offline-base.XXXXXX)"
trap 'rm -rf "$root"' EXIT
echo "building the offline base $IMAGE (debootstrap bookworm from $MIRROR)"
debootstrap --variant=minbase --include="$PACKAGES" bookworm "$root" "$MIRROR" \
    > "$root.log" 2>&1 || { tail -20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
# What a registry's image would not carry: the package lists and caches.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
tar -C "$root" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'LABEL io.kchaos=1' \
    --change "LABEL io.kchaos.packages=$PACKAGES" \
    --change 'CMD ["/bin/bash"]' - "$IMAGE" > /dev/null
echo "offline base $IMAGE built"
