# Two entry points for a fresh machine (see README): `make demo` and `make test`.
# Everything they need is installed here: a virtualenv with the Python packages, the Rust
# extension built by maturin (release), nothing from the system beyond python3 and cargo.

PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: setup demo test bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Rebuild when the Rust or the package metadata changes.
$(STAMP): $(BIN)/python pyproject.toml $(shell find core_rs -name '*.rs' -o -name 'Cargo.toml' | grep -v target)
	command -v cargo >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)"; exit 1; }
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/colosim run experiments/clickhouse_stress.toml --out out/clickhouse_stress

test: setup
	cd core_rs && cargo test -q   # debug: overflow checks on, quick to build
	$(BIN)/python -m pytest tests -q

bench: setup
	cd core_rs && cargo bench --bench scheduler
	$(BIN)/python experiments/bench.py

clean:
	rm -rf $(VENV) out core_rs/target sim/_core*.so
