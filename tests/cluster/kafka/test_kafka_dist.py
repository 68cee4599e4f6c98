"""Apache Kafka's jars from Maven Central (cluster/kafka/dist.py): a
version that does not resolve, a missing Maven or Java, each one clear line;
a fetched version works with neither Maven nor the network."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cluster.kafka import dist


@pytest.fixture
def empty_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(dist.CACHE_SETTING, str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def no_tools(tmp_path, monkeypatch) -> None:
    """A PATH with neither mvn nor java on it, and no JAVA_HOME."""
    bare = tmp_path / "bin"
    bare.mkdir()
    monkeypatch.setenv("PATH", str(bare))
    monkeypatch.delenv("JAVA_HOME", raising=False)


def test_a_version_that_does_not_exist_is_named(empty_cache):
    with pytest.raises(dist.KafkaDistError, match=r"^kafka_version='0\.0\.404': Apache Kafka "
                       r"0\.0\.404 does not resolve from Maven Central \(org\.apache\.kafka:"
                       r"kafka_2\.13:0\.0\.404\); pass a released version, e\.g\. "):
        dist.ensure("0.0.404")
    assert not list(empty_cache.glob("kafka/0.0.404/*")), "a failed fetch leaves nothing"


@pytest.mark.parametrize("version", ["", "4.4 .0", "../4.4.0", "latest"])
def test_a_malformed_version_is_refused_before_maven(empty_cache, version):
    with pytest.raises(dist.KafkaDistError, match="not a Kafka release version"):
        dist.ensure(version)


def test_missing_maven_says_how_to_install_it(empty_cache, no_tools):
    with pytest.raises(dist.KafkaDistError, match=r"^mvn: not found; .*apt-get install maven"):
        dist.ensure(dist.DEFAULT_VERSION)


def test_missing_java_says_how_to_install_it(no_tools):
    with pytest.raises(dist.KafkaDistError, match=r"^java: not found .*apt-get install "
                       r"openjdk-17-jre-headless"):
        dist.java()


def test_a_fetched_version_needs_neither_maven_nor_network(tmp_path, monkeypatch):
    """The cache of `make test`'s own fetch, then a PATH without mvn."""
    lib = dist.ensure(dist.DEFAULT_VERSION)
    assert (lib / f"kafka_2.13-{dist.DEFAULT_VERSION}.jar").is_file()
    assert (lib / f"kafka-clients-{dist.DEFAULT_VERSION}.jar").is_file()
    assert any(lib.glob("slf4j-simple-*.jar")), "Kafka's log lines need a backend"
    java = dist.java()
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(Path(java).resolve().parents[1]))
    assert shutil.which("mvn") is None
    assert dist.ensure(dist.DEFAULT_VERSION) == lib
