# kafkalab: the two commands of the README quick start, and a few helpers.
#
#   make lab    set up everything and start JupyterLab on labs/
#   make test   set up everything and run every test (unit, integration, faults,
#               specs, notebooks under nbval)
#
# Both create and reuse a virtual environment in .venv. Notebooks read their size
# from KAFKALAB_SCALE: `full` (the workshop run, default) or `ci` (small and fast).
#
# `make lab` listens on LAB_IP (127.0.0.1) and LAB_PORT (unset: Jupyter's own
# default, 8888 or $JUPYTER_PORT, and the next free port when that one is taken),
# e.g. `make lab LAB_PORT=9999`, or `make lab LAB_IP=0.0.0.0` in a container whose
# port you publish with `docker run -p`.

PYTHON ?= python3
VENV   ?= .venv
LAB_IP   ?= 127.0.0.1
LAB_PORT ?=
BIN    := $(VENV)/bin
# Tests and notebooks run on TEST_WORKERS pytest workers (pytest-xdist), a test
# module or notebook each (--dist loadfile: a module's cluster starts once). Most of
# them wait on clusters, sockets and timeouts, not the CPU: two workers on two cores
# about halve the run. TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 2
PYTEST_WORKERS := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile) --durations=15
STAMP  := $(VENV)/.kafkalab-installed
JS_STAMP := tests/js/node_modules/.installed

.PHONY: lab test setup system-deps lint bench soak fuzz binder-fit clean

# --allow-root: as root (most containers, Codespaces-style images, CI runners)
# JupyterLab refuses to start without it. For any other user it changes nothing
# (the flag only switches off that check), so it is passed always: every user,
# and tests/integration/test_make_lab.py, runs the very same command.
lab: setup
	@echo "kafkalab: starting JupyterLab on labs/ (open the http://...?token=... URL it prints below; Ctrl-C twice stops it)"
	$(BIN)/jupyter lab --notebook-dir=labs --ip=$(LAB_IP) $(if $(LAB_PORT),--port=$(LAB_PORT)) --no-browser --allow-root

test: setup $(JS_STAMP)
	$(BIN)/ruff check kafkalab tests benchmarks
	$(BIN)/pytest -p no:cacheprovider $(PYTEST_WORKERS) tests
	$(BIN)/pytest -p no:cacheprovider $(PYTEST_WORKERS) --nbval-lax --nbval-current-env labs

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

# The cluster's soak (100 faults under load) and the protocol fuzzer (a million
# hostile frames): long, run on purpose; pass options with SOAK_ARGS / FUZZ_ARGS.
soak: setup
	$(BIN)/python benchmarks/soak.py $(SOAK_ARGS)

fuzz: setup
	$(BIN)/python benchmarks/fuzz_protocol.py $(FUZZ_ARGS)

# Every notebook as Binder runs it (binder/start's environment, one CPU): wall
# time and the peak memory of the kernel's whole process tree, against 2 GiB.
binder-fit: setup
	$(BIN)/python benchmarks/labs_on_binder.py $(BINDER_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info tests/js/node_modules
