# kafkalab: the two commands of the README quick start, and a few helpers.
#
#   make lab    set up everything and start JupyterLab on labs/
#   make test   set up everything and run every test (unit, integration, faults,
#               specs, notebooks under nbval)
#
# Both create and reuse a virtual environment in .venv. Notebooks read their size
# from KAFKALAB_SCALE: `full` (the workshop run, default) or `ci` (small and fast).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.kafkalab-installed
JS_STAMP := tests/js/node_modules/.installed

.PHONY: lab test setup system-deps lint bench clean

lab: setup
	@echo "kafkalab: starting JupyterLab on labs/ (open the http://127.0.0.1 URL it prints; Ctrl-C stops it)"
	$(BIN)/jupyter lab --notebook-dir=labs --ip=127.0.0.1 --no-browser

test: setup $(JS_STAMP)
	$(BIN)/ruff check kafkalab tests benchmarks
	$(BIN)/pytest -p no:cacheprovider tests
	$(BIN)/pytest -p no:cacheprovider --nbval-lax --nbval-current-env labs

setup: system-deps $(STAMP)

system-deps:
	@PYTHON=$(PYTHON) scripts/ensure-system-deps.sh

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[labs,dev]'
	touch $(STAMP)

# kafkajs is a test peer; without Node.js its test is skipped and says why.
$(JS_STAMP): tests/js/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --silent --prefix tests/js && touch $(JS_STAMP); \
	else echo "kafkalab: npm not found, the kafkajs test will be skipped"; fi

lint: setup
	$(BIN)/ruff check kafkalab tests benchmarks
	$(BIN)/ruff format --check kafkalab tests benchmarks

bench: setup
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info tests/js/node_modules
