# The two commands a new machine needs: `make demo` and `make test`. Both set up .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The test suite also runs simulate on a real Ray cluster (tests/test_sim_ray.py): the `ray` extra, tests only.
TEST_STAMP := $(VENV)/.installed-test

.PHONY: demo test unit integration lint bench ui-bench clean controlplane controller-manager kueue proto conformance node \
	node-e2e lab-node chart-e2e kueue-conformance

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

# hack/test-deps.sh first: hwloc, Chromium and the Go-built components where this machine allows (a no-op once there);
# whatever it cannot install, the tests that need it skip naming it (fail under CI=true).
test: $(TEST_STAMP)
	hack/test-deps.sh
	$(BIN)/ruff check .
	$(BIN)/pytest -q -n auto -m "not integration"
	$(BIN)/pytest -q -m "integration and not node" || [ $$? -eq 5 ]

unit: $(STAMP)
	$(BIN)/pytest -q -n auto -m "not integration"

integration: $(TEST_STAMP)
	$(BIN)/pytest -q -m "integration and not node" || [ $$? -eq 5 ]

lint: $(STAMP)
	$(BIN)/ruff check .

# The real etcd + kube-apiserver the live integration tests run against, built from Go modules into a cache
# (docs/live-testing.md); a no-op when already built.
controlplane:
	hack/build-controlplane.sh

# kube-controller-manager v1.36.3 from the same module, cached under its own key: the DRA tests run its resourceclaim
# controller alone (tests/live/test_live_dra.py). About a minute once the control plane's modules are built.
controller-manager:
	hack/build-controlplane.sh kube-controller-manager

# Kueue v0.19.2's controller from its own module (hack/kueue), cached likewise: the queue oracle runs it.
kueue:
	hack/build-controlplane.sh kueue

# A real node (docs/node.md): the kubelet v1.36.3 built from the pinned module (cached like the control plane), and
# containerd, runc and the CNI plugins from Debian when missing (root). A no-op when all are there.
node:
	hack/build-node.sh

# The real-node tests (tests/node: kubelet + containerd + runc, the device plugin, accelsched run), as root; about
# 4 minutes on 2 cores once built. The last line is `node e2e: P/N pods ran with the devices accelsched chose`.
NODE_REPORT := $(or $(TMPDIR),/tmp)/accelsched-node-e2e.jsonl
node-e2e: $(TEST_STAMP) controlplane node
	@rm -f $(NODE_REPORT)
	@ACCELSCHED_REQUIRE_NODE=1 ACCELSCHED_NODE_REPORT=$(NODE_REPORT) $(BIN)/pytest -q -p no:cacheprovider -m "not chart" \
	  tests/node; rc=$$?; $(BIN)/python tests/node/summary.py $(NODE_REPORT) $$rc

# The Helm chart on the same real node (docs/install.md, docs/node.md), as root: the image from the Dockerfile (built
# by hack/build-image.sh the first time for its content, cached as an OCI archive after), imported into containerd;
# kube-controller-manager and kube-proxy v1.36.3 beside the node; helm install, the in-cluster scheduler binding
# workload pods, upgrade, rollback, uninstall. The last line is `chart e2e: P/N pods ran, scheduled by the in-cluster
# accelsched`.
CHART_REPORT := $(or $(TMPDIR),/tmp)/accelsched-chart-e2e.jsonl
chart-e2e: $(TEST_STAMP) controlplane node
	@hack/build-controlplane.sh kube-controller-manager >/dev/null
	@hack/build-controlplane.sh kube-proxy >/dev/null
	@hack/build-controlplane.sh helm >/dev/null
	@rm -f $(CHART_REPORT)
	@ACCELSCHED_REQUIRE_NODE=1 ACCELSCHED_NODE_REPORT=$(CHART_REPORT) $(BIN)/pytest -q -p no:cacheprovider \
	  tests/node/test_chart_node.py; rc=$$?; $(BIN)/python tests/node/summary.py $(CHART_REPORT) $$rc chart

# The lab's device-plugin step on this machine's real kubelet; exits 2 naming what is missing where containers
# cannot run (not root, no containerd/runc/CNI plugins).
lab-node: $(STAMP)
	@if [ "$$(id -u)" = 0 ]; then hack/build-node.sh >/dev/null; fi
	$(BIN)/python tests/node/lab.py

# Regenerate the device plugin's gRPC stubs from accelsched/deviceplugin/proto/api.proto (the wire format's one source).
proto: $(STAMP)
	$(BIN)/python -m accelsched.deviceplugin.gen
	$(BIN)/python -m accelsched.dra.driver.gen

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# The `accelsched ui` page in headless Chromium: first render, update after a bind, scroll (lab, 1,000 and 5,000
# nodes; live against the control plane when it is built). Needs the dev extra (Playwright) and Debian's chromium.
ui-bench: $(STAMP)
	$(BIN)/python -m benchmarks.ui

# Both differential oracles (hack/conformance.sh), each run whatever the others' results: accelsched's queue admission vs the real Kueue
# v0.19.2 (docs/queues.md: 1,000 scenarios, seed 3, line `kueue-conformance: agree A/N (...)`, below 99.5% fails;
# then the classes run alone, each against a Kueue of its own: 100 fair-sharing scenarios, seed 7, below 97% fails,
# since Kueue's own answer varies there between runs, and 60 preemption-gate scenarios, seed 1, below 99.5%),
# then accelsched vs the real kube-scheduler v1.36.3 (docs/conformance.md): fixed seed, 2,000 scenarios; the last
# line is `conformance: agree A/N (...)`, below 99.5% fails (99% for the 1,000 DRA scenarios drawn beside them).
# It ends with one line per run, its verdict line and exit status, so the tail of a log says which one failed.
conformance: $(STAMP) controlplane kueue
	hack/conformance.sh $(BIN)/python

# accelsched's queue admission vs the real Kueue v0.19.2 alone (docs/queues.md): the 30-scenario sample (also in
# `make test`'s integration suite, about 3 minutes), then the 1,000 scenarios `make conformance` runs too, last line
# `kueue-conformance: agree A/N (...)`, exit 1 below 99.5%.
kueue-conformance: $(TEST_STAMP) controlplane kueue
	$(BIN)/pytest -q -p no:cacheprovider -m kueue_oracle tests/live/test_kueue_oracle.py
	$(BIN)/python -m conformance.kueue --scenarios 1000 --seed 3

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
