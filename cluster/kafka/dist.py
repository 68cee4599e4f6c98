"""Apache Kafka's jars, resolved by name from Maven Central with Maven
(cluster/kafka/pom.xml) into a cache of one directory per version:

    $KCHAOS_CACHE (default ~/.cache/kchaos)/kafka/<version>/lib/*.jar

A version is fetched once; after that a run needs no network and no Maven
(`lib/` appears whole or not at all: it is filled beside and renamed).
Nodes run Kafka as `java -cp 'lib/*' kafka.Kafka server.properties` — no
tarball and no start scripts — so the only other thing a node needs is a
Java runtime (17+ for Kafka 4; 11+ for 3.x brokers).

    python -m cluster.kafka.dist [VERSION ...]  # fetch, print each lib directory
    python -m cluster.kafka.dist --tested       # the versions the tests run
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cluster.node import Node, SetupError

POM = Path(__file__).with_name("pom.xml")
# The version `--db kafka` runs unless told: the pom's own default, so that
# a `mvn -f pom.xml` by hand and kchaos fetch the same release.
DEFAULT_VERSION = re.search(r"<kafka\.version>([^<]+)</kafka\.version>",
                            POM.read_text()).group(1)
# The releases the test suite runs: the newest, and the last of the 3.x line
# that many users still run (`make test` fetches both).
TESTED_VERSIONS = (DEFAULT_VERSION, "3.9.1")
CACHE_SETTING = "KCHAOS_CACHE"
MAVEN_TIMEOUT = 600.0       # s: a first fetch of ~45 jars over a slow link
_VERSION = re.compile(r"[0-9][0-9A-Za-z.+-]*")


class KafkaDistError(SetupError, RuntimeError):
    """Kafka's jars could not be had: the message says why and how to fix it."""


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_SETTING) or Path.home() / ".cache" / "kchaos")


def lib_dir(version: str) -> Path:
    """Where version's jars are (or will be) cached."""
    return cache_root() / "kafka" / version / "lib"


def check_version(version: str) -> str:
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise KafkaDistError(f"kafka_version={version!r}: not a Kafka release version; "
                             f"write it as Maven Central names it, e.g. {DEFAULT_VERSION!r} "
                             f"or '3.9.1'")
    return version


def java() -> str:
    """The Java that runs Kafka here (JAVA_HOME's, else the PATH's)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home and \
        (Path(home) / "bin" / "java").is_file() else shutil.which("java")
    if not found:
        raise KafkaDistError("java: not found (JAVA_HOME unset and no java on PATH); Kafka "
                             "runs on a Java runtime: apt-get install openjdk-17-jre-headless")
    return found


def ensure(version: str = DEFAULT_VERSION) -> Path:
    """The lib directory of Kafka `version`, fetched with Maven if missing."""
    lib = lib_dir(check_version(version))
    if lib.is_dir():
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaDistError(f"mvn: not found; kchaos resolves Apache Kafka {version}'s jars "
                             f"from Maven Central with Maven once: apt-get install maven "
                             f"(or put {lib} in place yourself)")
    lib.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".lib-", dir=lib.parent))
    try:
        try:
            done = subprocess.run(
                [mvn, "-B", "-q", "-f", str(POM), f"-Dkafka.version={version}",
                 "-DincludeScope=runtime", f"-DoutputDirectory={scratch}",
                 "dependency:copy-dependencies"],
                capture_output=True, text=True, timeout=MAVEN_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise KafkaDistError(f"Apache Kafka {version}: Maven did not finish resolving its "
                                 f"jars in {MAVEN_TIMEOUT:.0f} s; is Maven Central "
                                 f"reachable?") from None
        if done.returncode != 0:
            raise KafkaDistError(_why(version, done.stdout + done.stderr))
        if not any(scratch.glob(f"kafka_2.13-{version}.jar")):
            raise KafkaDistError(f"Apache Kafka {version}: Maven resolved no "
                                 f"kafka_2.13-{version}.jar into {scratch}")
        scratch.rename(lib)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return lib


def _why(version: str, output: str) -> str:
    output = re.sub(r"\x1b\[[0-9;]*m", "", output)      # Maven's colours, even with -B
    if re.search(rf"(Could not find artifact|Failure to find) org\.apache\.kafka:kafka_2\.13:"
                 rf"jar:{re.escape(version)}\b|kafka_2\.13:jar:{re.escape(version)} was not "
                 rf"found|kafka_2\.13:jar:{re.escape(version)} has not been downloaded", output):
        return (f"kafka_version={version!r}: Apache Kafka {version} does not resolve from "
                f"Maven Central (org.apache.kafka:kafka_2.13:{version}); pass a released "
                f"version, e.g. {DEFAULT_VERSION}")
    errors = [line.removeprefix("[ERROR] ").strip() for line in output.splitlines()
              if line.startswith("[ERROR]") and line.strip() != "[ERROR]"]
    return (f"Apache Kafka {version}: Maven could not resolve its jars: "
            f"{errors[0] if errors else output.strip()[-500:]}")


# -- on the nodes ----------------------------------------------------------------

COMPLETE = ".complete"      # written last: a directory without it is copied again


def install(node: Node, lib: Path) -> str:
    """Where the jars of `lib` are on node: the cache itself on a node that
    shares this machine's files (local nodes), else a copy made once under
    the node's root (`<workdir>/../dist/kafka-<version>`)."""
    from cluster.local import LocalNode
    if isinstance(node, LocalNode):
        return str(lib)
    target = node.workdir.parent / "dist" / f"kafka-{lib.parent.name}"
    if node.run(["test", "-e", str(target / COMPLETE)], check=False).returncode == 0:
        return str(target)
    # One tar, not a put per jar: a put on a docker node is an exec, and 45
    # of them per node took most of a Kafka cluster's start there. It is
    # put as a file (SFTP on ssh hosts: as a command's input, paramiko
    # took 13 s for the 43 MB, SFTP 0.6 s), unpacked beside under the
    # node's own name (nodes may share a root: ssh hosts on one machine),
    # then renamed.
    scratch = target.with_name(f".{target.name}.{node.name}")
    archive = scratch.with_name(scratch.name + ".tar")
    node.run(["rm", "-rf", str(scratch)])
    node.run(["mkdir", "-p", str(scratch)])
    node.put(archive, _tar(lib))
    node.run(["sh", "-c", 'tar -x -f "$1" -C "$2" && rm "$1" && touch "$2/' + COMPLETE + '"'
              ' && rm -rf "$3" && mv "$2" "$3"',
              "kchaos-install", str(archive), str(scratch), str(target)], timeout=300.0)
    return str(target)


def _tar(lib: Path) -> bytes:
    """The jars of lib as an uncompressed tar (jars are compressed already)."""
    import io
    import tarfile
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for jar in sorted(lib.glob("*.jar")):
            tar.add(jar, arcname=jar.name)
    return buffer.getvalue()


def java_on(node: Node) -> str:
    """The Java that runs Kafka on node: this machine's on a local node,
    else the node's own on its PATH."""
    from cluster.local import LocalNode
    return java() if isinstance(node, LocalNode) else "java"


def main(argv: list[str]) -> int:
    versions = TESTED_VERSIONS if argv == ["--tested"] else argv or [DEFAULT_VERSION]
    for version in versions:
        try:
            print(ensure(version))
        except KafkaDistError as e:
            print(e, file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
