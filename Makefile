# The two commands a new machine needs: `make demo` and `make test`. Both set up .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test unit integration lint bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/accelsched demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/pytest -q -m "not integration"
	$(BIN)/pytest -q -m integration || [ $$? -eq 5 ]

unit: $(STAMP)
	$(BIN)/pytest -q -m "not integration"

integration: $(STAMP)
	$(BIN)/pytest -q -m integration || [ $$? -eq 5 ]

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
