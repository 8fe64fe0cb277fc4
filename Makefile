# Two entry points for a fresh machine (see README): `make demo` and `make test`; `make lint`
# runs the gates CI runs before the tests.
# Everything they need is installed here: a virtualenv with the Python packages, the Rust
# extension built by maturin (release), colosim-load (the host side of replay), and — for
# replay's tests on a real host — the Debian packages of the seed experiments' programs, and
# chromium, which loads the HTML reports in the tests.

PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
LOAD    := core_rs/target/release/colosim-load
# (pgbench: Debian ships it with the server, in postgresql-NN, which `postgresql` pulls in;
# redis-benchmark comes with redis-server, in redis-tools)
DEBS    := stress stress-ng wrk nginx clickhouse-server clickhouse-client clickhouse-tools postgresql redis-server chromium

.PHONY: setup host-packages demo lint test bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Rebuild when the Rust or the package metadata changes.
$(STAMP): $(BIN)/python pyproject.toml $(shell find core_rs -name '*.rs' -o -name 'Cargo.toml' | grep -v target)
	command -v cargo >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)"; exit 1; }
	$(BIN)/pip install -q -e '.[test,lint]'
	touch $(STAMP)

$(LOAD): $(STAMP)
	cd core_rs && cargo build -q --release -p colosim-load

setup: $(STAMP) $(LOAD)

# The programs replay runs on the host, and chromium for the reports (apt-get, as root; skipped
# where apt-get or root is missing — the host and browser tests then say what they skip and why).
host-packages:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  missing=""; for p in $(DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi; \
	else echo "not root or no apt-get: $(DEBS) not installed"; fi

demo: setup
	$(BIN)/colosim run experiments/clickhouse_stress.toml --out out/clickhouse_stress

# Gates: ruff (lint + format), mypy (config in pyproject: strict on the seam and the tuner),
# clippy and rustfmt, and the extension's stub checked against the built module.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m mypy sim policies replay traces
	cd core_rs && cargo clippy -q --all-targets -- -D warnings
	cd core_rs && cargo fmt --check
	$(BIN)/python -m mypy.stubtest sim._core

test: setup host-packages
	cd core_rs && cargo test -q   # debug: overflow checks on, quick to build
	$(BIN)/python -m pytest tests -q -rs

bench: setup
	cd core_rs && cargo bench --bench scheduler
	$(BIN)/python experiments/bench.py
	$(BIN)/python experiments/bench_tune.py

clean:
	rm -rf $(VENV) out core_rs/target sim/_core*.so
