# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Both create .venv and install rlplex with what it needs; torch is pinned so
# that pip takes the local CPU build instead of gigabytes of CUDA wheels.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed-stamp

.PHONY: setup demo test lint unit browser bench clean

$(STAMP): pyproject.toml Makefile
	@echo "[setup] creating $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	@echo "[setup] installing torch 2.13.0 (CPU build from the local wheel)"
	$(PIP) install -q --no-compile torch==2.13.0
	@echo "[setup] installing rlplex with Ray, transformers and the test tools"
	$(PIP) install -q --no-compile -e ".[run,dev]"
	@echo "[setup] building DeepSpeed against that torch (no ops)"
	# DeepSpeed builds against the torch above; no build isolation, so pip cannot pull a CUDA torch.
	$(PIP) install -q --no-compile --no-build-isolation "deepspeed>=0.17"
	@echo "[setup] compiling the installed packages' bytecode on every core"
	# pip compiles on one core (half of the set-up's time); Ray workers import torch and
	# transformers in every test, twice as slowly without bytecode. Left out: Ray's libraries
	# rlplex does not use and transformers' models the tests do not build (a third of the
	# compile time); a module left out, or a file that does not compile (a template in a
	# package's data, hence the "|| true"), is compiled in memory when imported.
	$(PY) -m compileall -q -j 0 \
	  -x '/ray/(rllib|tune|serve|train|data|air|llm)/|/transformers/models/(?!(auto|llama|qwen\w*|gemma\w*|deepseek\w*|mixtral|mistral)/)[^/]+/' \
	  $(VENV)/lib >/dev/null 2>&1 || true
	touch $(STAMP)

setup: $(STAMP)

# The main job: plan a colocated PPO step, then train GRPO on the toy task under a
# local Ray with the planner's offload/reload plan (writes demo-out/).
demo: setup
	$(VENV)/bin/rlplex plan examples/ppo.yaml
	RAY_AUTH_MODE=disabled $(PY) -m rlplex.pipelines.demo --out demo-out

# Headless Chromium for the browser tests of the HTML views, Graphviz for DAG pictures (Debian packages).
browser:
	@command -v chromium >/dev/null 2>&1 || { echo "[setup] installing Chromium (apt)"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@command -v dot >/dev/null 2>&1 || { echo "[setup] installing Graphviz (apt)"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null; }

lint: setup
	@echo "[lint] ruff check and ruff format --check"
	$(VENV)/bin/ruff check rlplex tests bench examples
	$(VENV)/bin/ruff format --check rlplex tests bench examples

# Two pytest-xdist workers, each with its own local Ray (started at its first Ray test,
# see tests/conftest.py); every test, Ray or not, goes to whichever worker is free
# (loadgroup with no groups hands out one test at a time). Dots appear as tests end.
unit: setup
	@echo "[unit] pytest -n 2: about 2,470 tests (6-7 min on 2 cores), the slow learning runs first; the Ray tests on both workers, one Ray each"
	$(PY) -m pytest -q -n 2 --dist loadgroup

test: setup browser lint unit

bench: setup
	$(PY) bench/planner.py
	$(PY) bench/viz.py
	$(PY) bench/import_records.py
	$(PY) bench/replay.py
	$(PY) bench/published.py
	$(PY) bench/serving.py
	$(PY) bench/elementwise_bytes.py
	RAY_AUTH_MODE=disabled $(PY) bench/controller_bytes.py
	RAY_AUTH_MODE=disabled $(PY) bench/executor.py
	# GPU checks: each prints "no CUDA: not measured" without CUDA.
	$(PY) bench/gpu_offload.py
	RAY_AUTH_MODE=disabled $(PY) bench/gpu_weight_sync.py
	RAY_AUTH_MODE=disabled $(PY) bench/gpu_grpo.py

clean:
	rm -rf $(VENV) demo-out .pytest_cache
