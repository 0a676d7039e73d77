# The pipeline's stages, chained: `make eval MODEL=x` brings everything it needs up to date.
# Each recipe is one line, $(GOAL) <target>: `python -m pipeline goal <target>` reads the
# variables (CORPUS, MODEL, SIZE, ...: docs/variables.md) from its environment, where make puts
# those given on its command line, checks them and runs the target's stages
# (pipeline/cli/goals.py), each deciding by content what is current (make keeps no timestamps
# of its own). make defines none of the variables: their defaults and checks are
# pipeline/cli/variables.py's. `make -n <target>` prints the stages' commands and runs none.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# make would run a '$' in a value of its command line as make code when it passes the value on
# (and one in PYTHON, VENV, PY or STAMP when it runs them): refused here, before anything runs.
ifneq ($(findstring $$,$(MAKEOVERRIDES)$(value PYTHON)$(value VENV)$(value PY)$(value STAMP)),)
$(error error: a value on make's command line (or PYTHON, VENV, PY, STAMP) holds a '$$', which make would run as code: give a plain value)
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
q = '$(subst ','\'',$(1))'

# The stages of a target; `+`: run under make -n too, where it prints their commands only.
# make's goals go with them (what each goal needs: TARGETS in pipeline/cli/variables.py).
export MDCR_MAKE_GOALS := $(MAKECMDGOALS)
GOAL = MDCR_PIPELINE_FROM_MAKE=1 $(call q,$(PY)) -m pipeline goal

# Every variable given, checked before anything runs, make setup's environment included: one
# line and exit status 2 when one is wrong. $(shell) does not see make's command line, so the
# check gets it as make keeps it (MAKEOVERRIDES). PYTHON runs the check: an executable first.
ifeq ($(shell command -v $(call q,$(PYTHON))),)
$(error error: PYTHON must be one executable or path of letters, digits and ._/+-, e.g. PYTHON=python3.11)
endif
# A line break, which $(shell) would drop, goes as the byte 0x1e (the check refuses it).
define NEWLINE


endef
CHECK := $(shell MDCR_MAKE_OVERRIDES=$(call q,$(subst $(NEWLINE),$(shell printf '\036'),$(MAKEOVERRIDES))) \
	MDCR_MAKE_GOALS=$(call q,$(MAKECMDGOALS)) $(call q,$(PYTHON)) -m pipeline check 2>&1)
ifneq ($(CHECK),)
$(error $(CHECK))
endif

.PHONY: help check setup setup-gpu demo test test-fast lint download corpus pool pools \
	training-ids pools-paper retire-pool embed index search eval fuse report mdcr mdcr-jaccard \
	import-mdcr export-mdcr mdcr-scores import-beir import-irds import-csfcube import-run \
	import-vectors verify sweep models clean-demo
.DELETE_ON_ERROR:

# The targets and their one-line descriptions: TARGETS in pipeline/cli/variables.py (standard
# library only, so it runs before the environment exists, like the check).
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

models: | $(STAMP)
	+@$(GOAL) models

# ---- corpus: synthesize (demo only), ingest, prefilter; pools -----------------------------
# make only chains the stages: each one is run and decides by content whether its outputs are
# current (same parameters, same input bytes, outputs that match their manifest). A current
# stage says so and does nothing; a stale, damaged or half-written output is made again. A
# corpus written whole (make mdcr, the imports) has nothing to ingest: `corpus` does nothing.
# The S2AG datasets from the Semantic Scholar Datasets API (key: S2_API_KEY, never printed)
# into the folder make corpus SOURCE=s2ag reads (docs/ingest.md).
download: | $(STAMP)
	+$(GOAL) download

corpus: | $(STAMP)
	+$(GOAL) corpus

pool: corpus
	+$(GOAL) pool

# The paper's whole grid: dataset-level and field-level pools, test and validation splits.
pools-paper: corpus
	+$(GOAL) pools-paper

training-ids: | $(STAMP)
	+$(GOAL) training-ids

# Every pool of CORPUS that is stale, damaged or half-written, built again from its recorded
# parameters (what make eval does first).
pools: corpus
	+$(GOAL) pools

# A pool moved aside with its index and runs, into the corpus's retired/ folders (no stage
# reads them again; nothing is deleted): docs/pools.md#retiring-a-pool.
retire-pool: | $(STAMP)
	+$(GOAL) retire-pool

# ---- per pool: index (Lucene / embeddings), search, eval ------------------------------------
# embed: here, or (EXECUTOR=slurm) a SLURM job array. eval with EXECUTOR=slurm: every embed
# shard in, search and score here; else a job after the array does.
embed: pools
	+$(GOAL) embed

# Each stage on its own (to time it, or to run it as a batch job): `index` is a no-op for a
# pool whose index is current; `search` makes the runs that `eval` scores. Each keeps what is
# current, checked by content, and redoes what is stale or damaged.
index: corpus
	+$(GOAL) index

search: corpus
	+$(GOAL) search

eval: search
	+$(GOAL) eval

# Fusion: every component evaluated, then the fused model like any other (its runs are made
# from the components' runs of the same pool; see pipeline/retrieval/fusion.py), in one process.
fuse: corpus
	+$(GOAL) fuse

# ---- MDCR-style benchmarks (MDCR §4; pipeline/mdcr/) ------------------------------------------
# From this corpus's field-level test pools and the MDCR_MODELS' runs of them: the benchmark
# corpus MDCR, which `make eval CORPUS=<MDCR> MODEL=..` scores (Tables 3 and 4 in its report).
mdcr: corpus
	+$(GOAL) mdcr

mdcr-jaccard: corpus
	+$(GOAL) mdcr-jaccard

# Outside collections as a corpus CORPUS: BEIR's layout, an ir_datasets id, CSFCube's release,
# the official MDCR files; a run or vectors made elsewhere (docs/external.md).
import-beir: | $(STAMP)
	+$(GOAL) import-beir

import-irds: | $(STAMP)
	+$(GOAL) import-irds

import-csfcube: | $(STAMP)
	+$(GOAL) import-csfcube

import-run: | $(STAMP)
	+$(GOAL) import-run

import-vectors: | $(STAMP)
	+$(GOAL) import-vectors

import-mdcr: | $(STAMP)
	+$(GOAL) import-mdcr

export-mdcr: | $(STAMP)
	+$(GOAL) export-mdcr

mdcr-scores: eval
	+$(GOAL) mdcr-scores

report: | $(STAMP)
	+$(GOAL) report

verify: | $(STAMP)
	+$(GOAL) verify

# Remove the temporaries of stopped processes (verify's DEBRIS).
sweep: | $(STAMP)
	+$(GOAL) sweep

# Every stage of the demo corpus in one process, in make's order (corpus, pools, embed, each
# model's search and eval, the report with this run's stage times).
demo: $(STAMP)
	+$(GOAL) demo

clean-demo: | $(STAMP)
	+$(GOAL) clean-demo

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
