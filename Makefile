# KernelBand Service. `make demo` and `make test` work on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: install lock wheelhouse demo test lint bench bench-gpu up down migrate worker screenshot reliability

# Every package comes from the committed lock at its exact version (pip-tools; `make lock`).
# A CPU machine takes the lock as it is, with the CPU build of torch (torch==2.13.0 is in it);
# a GPU node keeps its own CUDA torch and triton and takes everything else from the lock.
LOCK := requirements/lock.txt
NODE_LOCK := requirements/node.txt
SERVICE_LOCK := requirements/service.txt
GPU_NODE := command -v nvidia-smi >/dev/null 2>&1 && $(PY) -c "import torch, triton" 2>/dev/null

$(VENV)/.installed: pyproject.toml $(LOCK)
	python3.11 -m venv $(VENV) 2>/dev/null || python3 -m venv $(VENV)
	$(PIP) install -q --no-deps $$(grep -E '^pip==' $(LOCK))
	if $(GPU_NODE); then \
		grep -vE '^(torch|triton)==' $(LOCK) > $(VENV)/lock-gpu-node.txt; \
		$(PIP) install -q --no-deps -r $(VENV)/lock-gpu-node.txt; \
	else $(PIP) install -q --no-deps -r $(LOCK); fi
	$(PIP) install -q --no-deps --no-build-isolation -e .
	$(PIP) check
	touch $@

install: $(VENV)/.installed

# Refresh the lock after changing pyproject.toml's dependencies: requirements/lock.txt (everything,
# dev tools and the CPU torch included), requirements/service.txt (the container image: no dev
# tools) and requirements/node.txt (a GPU worker: no dev tools, no litellm), all at the same versions.
# Pins already in the lock stay unless they must move; `make lock UPGRADE=1` takes the newest.
PIP_COMPILE := $(VENV)/bin/pip-compile -q --strip-extras --allow-unsafe --no-emit-index-url \
	--no-emit-find-links $(if $(UPGRADE),--upgrade)
lock:
	test -x $(VENV)/bin/pip-compile || { python3.11 -m venv $(VENV) && $(PIP) install -q pip-tools; }
	$(PIP_COMPILE) --extra dev --extra llm -o $(LOCK) pyproject.toml requirements/torch-cpu.in
	$(PIP_COMPILE) -c $(LOCK) --extra llm -o $(SERVICE_LOCK) pyproject.toml
	$(PIP_COMPILE) -c $(LOCK) -o $(NODE_LOCK) pyproject.toml

# Wheels that install the project on a GPU node without internet (README, "Installing on a GPU
# node"). Pick the node's Python and platform with WHEEL_PYTHON / WHEEL_PLATFORM.
WHEELHOUSE ?= wheelhouse
WHEEL_PYTHON ?= 3.11
WHEEL_PLATFORM ?= manylinux2014_x86_64
wheelhouse: install
	rm -rf $(WHEELHOUSE) && mkdir -p $(WHEELHOUSE)
	grep -vE '^(torch|triton)==' $(NODE_LOCK) > $(WHEELHOUSE)/requirements.txt
	$(PIP) download -q --no-deps --only-binary=:all: --python-version $(WHEEL_PYTHON) \
		--platform $(WHEEL_PLATFORM) --platform manylinux_2_17_x86_64 \
		--platform manylinux_2_28_x86_64 --platform linux_x86_64 --platform any \
		-d $(WHEELHOUSE) -r $(WHEELHOUSE)/requirements.txt
	$(PIP) wheel -q --no-deps --no-build-isolation -w $(WHEELHOUSE) .
	@echo "$(WHEELHOUSE)/: $$(ls $(WHEELHOUSE)/*.whl | wc -l) wheels; on the node:"
	@echo "  pip install --no-index --find-links $(WHEELHOUSE) -r $(WHEELHOUSE)/requirements.txt kernelband"

demo: install
	$(PY) -m kernelband.demo

# The suite runs in TEST_WORKERS processes (pytest-xdist): one worker's tests wait on child
# processes (sandboxed runners, Celery workers, servers) while the other's use the cores. More
# workers than cores starve the CPU-bound service tests (4 on 2 cores: the suite campaign missed
# its wait). tests/conftest.py gives every test an id of its own, keeps each reliability file
# on one worker and starts the longest tests first. Tests marked `alone` assert on measured
# times (the interpreter A/A: runner CPU time, which another worker's load moves), so they run
# afterwards, by themselves.
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -q -p no:cacheprovider
test: install browser-deps
	$(PYTEST) --durations=15 -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder -m "not alone"
	$(PYTEST) -m alone

lint: install
	$(VENV)/bin/ruff check kernelband services tests bench
	$(VENV)/bin/mypy kernelband services

# Named benchmark scenarios (bench/scenarios.py; `$(PY) -m bench.scenarios` lists them).
# `make bench` runs every CPU benchmark into bench/RESULTS.md; `make bench SCENARIO=api-load` one;
# on a GPU node `make bench-gpu SCENARIO=paired-aa [OUT=DIR] [ARGS="..."]` (ARGS replace its defaults).
SCENARIO ?=
ARGS ?=
OUT ?=
bench: install
	$(PY) -m bench.scenarios $(or $(SCENARIO),all) $(if $(OUT),--out $(OUT)) $(ARGS)

# A GPU node often has no network to install from: bench-gpu uses the venv when there is one,
# else the node's own python (its CUDA torch and triton), and installs nothing.
GPU_PY ?= $(if $(wildcard $(PY)),$(PY),python3)
bench-gpu:
	@test -n "$(SCENARIO)" || { $(GPU_PY) -m bench.scenarios; echo 'make bench-gpu SCENARIO=<a gpu scenario above>'; exit 2; }
	$(GPU_PY) -m bench.scenarios --gpu $(SCENARIO) $(if $(OUT),--out $(OUT)) $(ARGS)

# Distributed deployment (docker-compose.yml); POSTGRES_PASSWORD and KERNELBAND_BOOTSTRAP_TOKEN
# must be set. GPU workers: `docker compose --profile gpu-h100 up -d worker-gpu-h100`.
up:
	docker compose up -d --build postgres redis migrate api scheduler webhooks worker-llm worker-cpu

down:
	docker compose down

# Upgrade the database at KERNELBAND_DATABASE_URL (embedded SQLite file when unset).
migrate: install
	$(VENV)/bin/kernelband migrate

# One worker on this machine: `make worker QUEUE=gpu.h100` (KERNELBAND_BROKER_URL -> shared Redis).
QUEUE ?= cpu
CONCURRENCY ?= 1
worker: install
	$(VENV)/bin/celery -A services.worker.app worker -Q $(QUEUE) -c $(CONCURRENCY) -n $(subst .,-,$(QUEUE))@%h

# Debian's Chromium for the browser tests (tests/browser); Playwright never downloads a browser.
.PHONY: browser-deps
browser-deps:
	@if [ ! -x /usr/bin/chromium ]; then \
		SUDO=$$([ "$$(id -u)" -ne 0 ] && command -v sudo >/dev/null && echo sudo); \
		$$SUDO apt-get update && $$SUDO apt-get install -y chromium chromium-driver; \
	fi

# Regenerate docs/job-page.png (README) from a live job in headless Chromium.
screenshot: install browser-deps
	$(PY) -m pytest -q -p no:cacheprovider tests/browser/test_dashboard_pages.py -k update_without_reload
	cp test-artifacts/browser/job-live.png docs/job-page.png

# Fault injection with real processes (kill -9, Redis restart, dropped Postgres connections),
# adversarial kernels in a running job, API fuzzing and auth; see docs/reliability.md.
reliability: install
	$(PY) -m pytest -q -p no:cacheprovider -s tests/reliability
