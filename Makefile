# The pipeline's stages chained through real files: `make eval MODEL=x` builds only what is
# missing. Every recipe calls `python -m pipeline <stage>`; see README.md for the variables.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TORCH_VERSION ?= 2.13.0
PYSERINI_VERSION ?= 1.6.0

CORPUS ?= demo
MODEL ?= minilm
SIZE ?= 10k
FIELD ?=
REPEATS ?= 1
SEED ?= 0
THREADS ?= 2
CITATIONS ?= inbound
RAW ?= $(DATA)/corpora/$(CORPUS)/s2orc
MODEL_PATH ?=
MODEL_ARGS = --model $(MODEL) $(if $(MODEL_PATH),--model-path $(MODEL_PATH))
# Paper defaults are 3,800 dataset-level / 200 per-field queries; the demo corpus uses 100.
QUERIES ?= $(if $(filter demo,$(CORPUS)),100,)

DEMO_PAPERS ?= 120k
DEMO_SIZES ?= 2k 5k 10k
DEMO_MODELS ?= bm25 minilm random

# Where corpora/, indexes/ and runs/ live (a scratch disk on a cluster, say).
DATA ?= .
PIPE = $(PY) -m pipeline --corpora-root $(DATA)/corpora --index-root $(DATA)/indexes \
	--runs-root $(DATA)/runs
CDIR := $(DATA)/corpora/$(CORPUS)
RUNS := $(DATA)/runs/$(CORPUS)
POOLS = $(notdir $(patsubst %/manifest.json,%,$(wildcard $(CDIR)/pools/*/manifest.json)))

# Check MODEL, FIELD and SIZE before anything runs: one line, exit status 2.
CHECK := $(shell $(PYTHON) -m pipeline check --model '$(MODEL)' \
	$(if $(FIELD),--field '$(FIELD)') --size '$(SIZE)' 2>&1)
ifneq ($(CHECK),)
$(error $(CHECK))
endif
ifneq ($(filter eval,$(MAKECMDGOALS)),)
ifeq ($(strip $(POOLS)),)
$(error error: no pools for CORPUS=$(CORPUS) under $(CDIR)/pools: build one first, e.g. make pool SIZE=10k)
endif
endif

.PHONY: help setup demo test lint corpus pool embed eval report models clean-demo
.SECONDARY:

help:
	@echo "make demo                      set up, generate the demo corpus, run every stage, report"
	@echo "make test                      set up and run the test suite"
	@echo "make pool [FIELD=f] SIZE=20k   build a dataset-level (or field-level) pool"
	@echo "make eval MODEL=bm25|minilm|.. index, search and score every pool of CORPUS"
	@echo "make report                    tables and plots under runs/reports/"
	@echo "make models                    list the model registry"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet torch==$(TORCH_VERSION)
	$(VENV)/bin/pip install --quiet -e '.[test]'
	@# pyserini is used for the Anserini jar it ships; its own Python deps are not needed.
	$(VENV)/bin/pip install --quiet --no-deps pyserini==$(PYSERINI_VERSION)
	touch $@

setup: $(STAMP)

models: $(STAMP)
	@$(PIPE) models

# ---- corpus: synthesize (demo only), ingest, prefilter -------------------------------------
ifeq ($(CORPUS),demo)
RAW_INPUT := $(CDIR)/s2orc/manifest.json
$(CDIR)/s2orc/manifest.json: | $(STAMP)
	$(PIPE) synth --corpus $(CORPUS) --papers $(DEMO_PAPERS) --seed $(SEED) --workers $(THREADS)
else
RAW_INPUT := $(wildcard $(RAW)/metadata/metadata_*.jsonl.gz)
endif

$(CDIR)/papers.parquet: $(RAW_INPUT) | $(STAMP)
	$(PIPE) ingest --corpus $(CORPUS) --raw $(RAW)

$(CDIR)/prefiltered.parquet: $(CDIR)/papers.parquet
	$(PIPE) prefilter --corpus $(CORPUS) --citations $(CITATIONS)

corpus: $(CDIR)/prefiltered.parquet

pool: $(CDIR)/prefiltered.parquet
	$(PIPE) pool --corpus $(CORPUS) --size "$(SIZE)" $(if $(FIELD),--field "$(FIELD)") \
		--repeats $(REPEATS) --seed $(SEED) $(if $(QUERIES),--queries $(QUERIES))

# ---- per pool: index (Lucene / embeddings), search, eval ------------------------------------
embed: | $(STAMP)
	$(PIPE) embed --corpus $(CORPUS) $(MODEL_ARGS)

$(RUNS)/%/$(MODEL).parquet: $(CDIR)/pools/%/manifest.json | $(STAMP)
	$(PIPE) index --corpus $(CORPUS) --pool $* $(MODEL_ARGS) --threads $(THREADS)
	$(PIPE) search --corpus $(CORPUS) --pool $* --model $(MODEL) --threads $(THREADS)

$(RUNS)/%/$(MODEL).eval.json: $(RUNS)/%/$(MODEL).parquet
	$(PIPE) eval --corpus $(CORPUS) --pool $* --model $(MODEL)

eval: $(foreach p,$(POOLS),$(RUNS)/$(p)/$(MODEL).eval.json)

report: | $(STAMP)
	$(PIPE) report --corpus $(CORPUS) --times

# ---- the two quick-start commands ------------------------------------------------------------
demo: $(STAMP)
	@rm -f $(DATA)/runs/demo/stage-times.jsonl
	@$(MAKE) --no-print-directory pool CORPUS=demo SIZE="$(DEMO_SIZES)"
	@$(MAKE) --no-print-directory embed CORPUS=demo MODEL=minilm
	@for m in $(DEMO_MODELS); do \
		$(MAKE) --no-print-directory eval CORPUS=demo MODEL=$$m || exit $$?; done
	@$(MAKE) --no-print-directory report CORPUS=demo

lint: $(STAMP)
	$(VENV)/bin/ruff check pipeline tests benchmarks

test: $(STAMP)
	$(VENV)/bin/ruff check pipeline tests benchmarks
	$(PY) -m pytest -q

clean-demo:
	rm -rf $(DATA)/corpora/demo $(DATA)/indexes/demo $(DATA)/runs/demo $(DATA)/runs/reports/demo*
