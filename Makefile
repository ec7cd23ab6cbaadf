# KernelBand Service. `make demo` and `make test` work on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: install demo test lint bench up down migrate worker gpu-validate screenshot reliability

$(VENV)/.installed: pyproject.toml
	python3.11 -m venv $(VENV) 2>/dev/null || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# CPU machines take the local CPU build of torch; a GPU node keeps its CUDA torch.
	if command -v nvidia-smi >/dev/null 2>&1 && $(PY) -c "import torch" 2>/dev/null; then :; \
	else $(PIP) install -q torch==2.13.0; fi
	$(PIP) install -q -e ".[dev]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(PY) -m kernelband.demo

test: install browser-deps
	$(PY) -m pytest -q -p no:cacheprovider --durations=15

lint: install
	$(VENV)/bin/ruff check kernelband services tests bench
	$(VENV)/bin/mypy kernelband services

bench: install
	$(PY) -m bench.run_all

# Distributed deployment (docker-compose.yml); POSTGRES_PASSWORD and KERNELBAND_BOOTSTRAP_TOKEN
# must be set. GPU workers: `docker compose --profile gpu-h100 up -d worker-gpu-h100`.
up:
	docker compose up -d --build postgres redis migrate api scheduler worker-llm worker-cpu

down:
	docker compose down

# Upgrade the database at KERNELBAND_DATABASE_URL (embedded SQLite file when unset).
migrate: install
	$(VENV)/bin/alembic upgrade head

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

# On a GPU machine: correctness, timing vs do_bench, static vs driver, ncu, embedded optimize
# (3 policies, T=20), then bench/gpu/RESULTS.md and bench/gpu/replay/measured.json (CPU step).
GPU_OUT ?= /tmp/kernelband-gpu-validate/out
gpu-validate: install
	$(PY) -m bench.gpu.validate --all --out $(GPU_OUT)
	$(PY) -m bench.gpu.validate --optimize --scaled --out $(GPU_OUT)-scaled
	TRITON_INTERPRET=1 $(PY) -m bench.gpu.validate --report --from $(GPU_OUT) --scaled-from $(GPU_OUT)-scaled
