# kchaos: everything a fresh Debian machine (as root, as CI runs) needs.
#   make run      the main job: kchaos run on a local 3-node reference cluster
#   make test     the whole test suite
#   make test-fast the suite without the tests marked slow (for edit loops)
#   make example  check the shipped sample run directory
#   make bench    the benchmarks that print docs/performance.md's figures
#   make validate the validation matrix: every bug switch found, no false alarm,
#                 and a 10-minute soak of every fault on the correct broker
#   make validate-generic the generic nemesis's detection power per switch,
#                 with Kafka's timings and with the stress profiles (hours each;
#                 resumable: rerun it to go on where it stopped)
#   make validate-kafka the evidence on Apache Kafka: its safe configuration
#                 valid under every fault, its unsafe settings found (hours;
#                 resumable)
#   make docker-deps Docker for the docker backend (root): engine, dockerd, offline base

PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: kafka-dist run test test-fast validate validate-kafka validate-generic example bench system-deps docker-deps clean

run: $(STAMP)
	@$(BIN)/python -m cluster.kafka.dist >/dev/null
	$(BIN)/kchaos run $(RUN_ARGS)

# Three workers on two cores: the end-to-end runs wait on time limits more
# than they use the cores (about 40% busy with two workers); tests/conftest.py
# keeps those that share a subnet, ports or hosts on one worker.
PARALLEL ?= -n 3 --dist loadgroup

test: $(STAMP) docker-deps kafka-dist
	$(BIN)/python -m pytest $(PARALLEL) --durations=25 $(PYTEST_ARGS)

test-fast: $(STAMP) docker-deps kafka-dist
	$(BIN)/python -m pytest $(PARALLEL) -m "not slow" $(PYTEST_ARGS)

validate: $(STAMP)
	$(BIN)/kchaos validate --soak 10 --write-docs --table-out store/validation.md $(VALIDATE_ARGS)

validate-kafka: $(STAMP) kafka-dist
	$(BIN)/kchaos validate --kafka --write-docs --table-out store/validation-kafka.md $(VALIDATE_ARGS)

validate-generic: $(STAMP)
	$(BIN)/kchaos validate --generic --write-docs --table-out store/validation-generic.md $(VALIDATE_ARGS)
	$(BIN)/kchaos validate --generic --profile stress --write-docs --table-out store/validation-generic-stress.md $(VALIDATE_ARGS)
	$(BIN)/kchaos validate --generic --profile stress-failover --write-docs --table-out store/validation-generic-stress-failover.md $(VALIDATE_ARGS)

example: $(STAMP)
	$(BIN)/kchaos validate-history examples/queue-sample
	$(BIN)/kchaos check examples/queue-sample

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python benchmarks/history_writer.py
	$(BIN)/python benchmarks/check_latency.py
	$(BIN)/python benchmarks/checker_scale.py --events 1000000 --anomalies 3 --seed 1 --jsonl
	$(BIN)/python benchmarks/ingest_stages.py store/checker-scale-N1000000-K3-S1
	$(BIN)/python benchmarks/check_on_cluster.py --events 1000000 --workers 2

# Apache Kafka's jars (--db kafka), the releases the tests run, from Maven
# Central once into ~/.cache/kchaos/kafka/<version>/lib (cluster/kafka/dist.py);
# `make run` fetches the default release only.
kafka-dist: $(STAMP)
	@$(BIN)/python -m cluster.kafka.dist --tested >/dev/null

# System packages: Java for Spark, venv for Python. Installed only if missing.
system-deps:
	@if ! command -v java >/dev/null 2>&1 && [ -z "$$JAVA_HOME" ]; then \
		echo "installing Java (Spark needs it)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless; \
	fi
	@if ! command -v mvn >/dev/null 2>&1; then \
		echo "installing maven (Apache Kafka's jars come from Maven Central by name)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven; \
	fi
	@if ! command -v ip >/dev/null 2>&1 || ! command -v pgrep >/dev/null 2>&1; then \
		echo "installing iproute2 and procps (node network namespaces, tests)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 procps; \
	fi
	@if ! command -v iptables >/dev/null 2>&1; then \
		echo "installing iptables (network faults: the KCHAOS chain in each node's namespace)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables; \
	fi
	@if ! command -v fusermount3 >/dev/null 2>&1 || ! ldconfig -p | grep -q 'libfuse3\.so\.3'; then \
		echo "installing fuse3 and libfuse3-3 (disk faults: the FUSE disk gate, nemesis/disk)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3 libfuse3-3; \
	fi
	@if ! command -v sshd >/dev/null 2>&1 && [ ! -x /usr/sbin/sshd ] || ! command -v ssh >/dev/null 2>&1 \
			|| ! command -v rsync >/dev/null 2>&1 || ! command -v sudo >/dev/null 2>&1; then \
		echo "installing openssh-server, openssh-client, rsync and sudo (the ssh backend and its tests)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			openssh-server openssh-client rsync sudo; \
	fi
	@if ! command -v chromium >/dev/null 2>&1; then \
		echo "installing chromium (the report's page tests run it headless)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	fi
	@if ! $(PYTHON) -c 'import ensurepip, venv' >/dev/null 2>&1; then \
		echo "installing python3-venv"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; \
	fi

# Docker for the docker backend and the tests marked `docker`: the engine
# (docker.io), debootstrap for the offline base image, docker-compose for
# docker/compose.yaml; dockerd started in the background when it does not
# answer (waited for, at most DOCKERD_WAIT s); the offline base built once
# (docker/build-offline-base.sh, a no-op when the image exists). Root only.
DOCKERD_LOG  ?= /var/log/kchaos-dockerd.log
DOCKERD_WAIT ?= 60

docker-deps:
	@if [ "$$(id -u)" != 0 ]; then \
		echo "docker-deps: not root, skipped (install Docker and start dockerd yourself)"; exit 0; \
	fi; \
	missing=""; \
	command -v dockerd >/dev/null 2>&1 || missing="$$missing docker.io"; \
	command -v debootstrap >/dev/null 2>&1 || missing="$$missing debootstrap"; \
	command -v docker-compose >/dev/null 2>&1 || missing="$$missing docker-compose"; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing (the docker backend and its tests)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing \
			|| exit 1; \
	fi; \
	if ! docker info >/dev/null 2>&1; then \
		echo "starting dockerd (log: $(DOCKERD_LOG))"; \
		setsid -f dockerd >>$(DOCKERD_LOG) 2>&1 </dev/null; \
		waited=0; \
		until docker info >/dev/null 2>&1; do \
			if [ $$waited -ge $(DOCKERD_WAIT) ]; then \
				echo "dockerd does not answer after $(DOCKERD_WAIT) s: see $(DOCKERD_LOG)"; exit 1; \
			fi; \
			sleep 1; waited=$$((waited + 1)); \
		done; \
	fi; \
	sh docker/build-offline-base.sh

# Re-install when the packaging or the set of packages changes (the editable
# install maps the packages that existed when it ran).
$(STAMP): pyproject.toml $(wildcard */__init__.py) | system-deps
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info
	find . -name __pycache__ -prune -exec rm -rf {} +
