# The two commands a new machine needs: `make demo` and `make test`. Both set up .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The test suite also runs simulate on a real Ray cluster (tests/test_sim_ray.py): the `ray` extra, tests only.
TEST_STAMP := $(VENV)/.installed-test

.PHONY: demo test unit integration lint bench clean controlplane proto conformance

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[dev,ray]'
	touch $(TEST_STAMP)

demo: $(STAMP)
	$(BIN)/accelsched demo

test: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/pytest -q -m "not integration"
	$(BIN)/pytest -q -m integration || [ $$? -eq 5 ]

unit: $(STAMP)
	$(BIN)/pytest -q -m "not integration"

integration: $(TEST_STAMP)
	$(BIN)/pytest -q -m integration || [ $$? -eq 5 ]

lint: $(STAMP)
	$(BIN)/ruff check .

# The real etcd + kube-apiserver the live integration tests run against, built from Go modules into a cache
# (docs/live-testing.md); a no-op when already built.
controlplane:
	hack/build-controlplane.sh

# Regenerate the device plugin's gRPC stubs from accelsched/deviceplugin/proto/api.proto (the wire format's one source).
proto: $(STAMP)
	$(BIN)/python -m accelsched.deviceplugin.gen

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# accelsched vs the real kube-scheduler v1.36.3 (docs/conformance.md): fixed seed, 2,000 scenarios; the last line is
# `conformance: agree A/N (...)`, exit 1 below 99.5%.
conformance: $(STAMP) controlplane
	$(BIN)/python -m conformance --scenarios 2000 --seed 12 --live-sample 20

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
