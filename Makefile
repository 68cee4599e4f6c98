# kchaos: everything a fresh Debian machine (as root, as CI runs) needs.
#   make run      the main job: kchaos run on a local 3-node reference cluster
#   make test     the whole test suite
#   make test-fast the suite without the tests marked slow (for edit loops)
#   make example  check the shipped sample run directory
#   make bench    the benchmarks that print the README's performance figures
#   make validate the validation matrix: every bug switch found, no false alarm,
#                 and a 10-minute soak of every fault on the correct broker

PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: run test test-fast validate example bench system-deps clean

run: $(STAMP)
	$(BIN)/kchaos run $(RUN_ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

validate: $(STAMP)
	$(BIN)/kchaos validate --soak 10 --table-out store/validation.md $(VALIDATE_ARGS)

example: $(STAMP)
	$(BIN)/kchaos validate-history examples/queue-sample
	$(BIN)/kchaos check examples/queue-sample

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python benchmarks/history_writer.py
	$(BIN)/python benchmarks/check_latency.py
	$(BIN)/python benchmarks/checker_scale.py --events 1000000 --anomalies 3 --seed 1 --jsonl
	$(BIN)/python benchmarks/ingest_stages.py store/checker-scale-N1000000-K3-S1

# System packages: Java for Spark, venv for Python. Installed only if missing.
system-deps:
	@if ! command -v java >/dev/null 2>&1 && [ -z "$$JAVA_HOME" ]; then \
		echo "installing Java (Spark needs it)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless; \
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
	@if ! $(PYTHON) -c 'import ensurepip, venv' >/dev/null 2>&1; then \
		echo "installing python3-venv"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; \
	fi

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
