# The pipeline's stages, chained: `make eval MODEL=x` brings everything it needs up to date.
# Every recipe calls `python -m pipeline <stage>`, which decides by content what is current
# (make keeps no timestamps of its own). The variables: docs/variables.md (make variables).
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The interpreter that makes the virtual environment VENV (and runs the variable check before
# it exists): each names an executable or a folder, checked below before anything runs it.
PYTHON ?= python3
VENV ?= .venv
PY = $(VENV)/bin/python
STAMP = $(VENV)/.installed
# The exact version of every package make setup installs, torch and pyserini included:
# constraints.txt (how to write it again: its first lines, docs/install.md).
CONSTRAINTS = constraints.txt

# The user variables (CORPUS, MODEL, SIZE, ...), their defaults and the list USER_VARS:
# generated from their one declaration, pipeline/cli/variables.py, by `make variables`; the
# table of them is docs/variables.md.
include pipeline/cli/variables.mk

# Every value reaches a shell single-quoted ($(call q,...)), so no value runs as shell code; a
# value given on the command line or in the environment may not hold '$' (make code).
q = '$(subst ','\'',$(1))'
# The executables and folders the recipes run: also settable, but not through the check (it is
# run by PYTHON): plain paths only, so none of them is shell code.
TOOL_VARS := PYTHON VENV PY STAMP
TIME_ALIAS := $(if $(filter command line,$(origin TIME)),TIME)
# Nor a line break: make's $(shell) would lose it, and a recipe would run two lines.
define NEWLINE


endef
$(foreach v,$(USER_VARS) $(TOOL_VARS) $(TIME_ALIAS),\
	$(if $(findstring command,$(origin $(v)))$(findstring environment,$(origin $(v))),$(if \
	$(findstring $$,$(value $(v))),$(error error: $(v) holds a '$$', which make would run as \
	code: give a plain value))$(if $(findstring $(NEWLINE),$(value $(v))),$(error error: $(v) \
	holds a line break: give the value on one line))))
# What is left of $(2) once every character of the list $(1) is taken out of it.
PATH_CHARS := a b c d e f g h i j k l m n o p q r s t u v w x y z A B C D E F G H I J K L M N O P \
	Q R S T U V W X Y Z 0 1 2 3 4 5 6 7 8 9 . _ / + -
strip_chars = $(if $(1),$(call strip_chars,$(wordlist 2,$(words $(1)),$(1)),$(subst \
	$(firstword $(1)),,$(2))),$(2))
$(foreach v,$(TOOL_VARS),$(if $(call strip_chars,$(PATH_CHARS),$($(v)))$(filter-out 1,$(words \
	$($(v)))),$(error error: $(v) must be one executable or path of letters, digits and ._/+- \
	(no spaces or shell characters), e.g. PYTHON=python3.11 or VENV=.venv)))
ifneq ($(TIME_ALIAS),)
ifneq ($(origin SLURM_TIME),command line)
SLURM_TIME := $(TIME)
else
TIME_ALIAS :=
endif
endif

# Check every variable before anything runs (one line, exit status 2); it writes nothing. Each
# goes as --NAME='value' (so a value starting with '-' is a value) (SLURM_TIME as --TIME when it
# came as TIME on the command line), with make's goals and the variables given on the command
# line or in the environment: a goal without what it needs (SRC, OUT, MODELS, a CORPUS named,
# a pool) is refused here too (TARGETS in pipeline/cli/variables.py). The check then prints one
# line, `check=ok NAME=value ...`: the names and paths make uses (DERIVED in
# pipeline/cli/variables.py, from pipeline/layout.py), which make reads, never composes.
# `make variables` alone runs no check: it writes the include again, even a stale one.
check_name = $(if $(and $(filter SLURM_TIME,$(1)),$(TIME_ALIAS)),TIME,$(1))
GIVEN = $(foreach v,$(USER_VARS),$(if $(filter command environment%,$(origin $(v))),$(v)))
# Every variable on make's command line, known or not (never the environment's): the check
# refuses an unknown one (MODLE=bm25) with the nearest known name.
COMMAND_LINE = $(foreach v,$(.VARIABLES),$(if $(filter command line,$(origin $(v))),$(v)))
ifneq ($(MAKECMDGOALS),variables)
CHECK := $(shell $(call q,$(PYTHON)) -m pipeline check $(foreach v,$(USER_VARS),\
	--$(call check_name,$(v))=$(call q,$($(v)))) --GOALS=$(call q,$(MAKECMDGOALS)) \
	--GIVEN=$(call q,$(strip $(GIVEN))) --COMMAND_LINE=$(call q,$(strip $(COMMAND_LINE))) 2>&1)
ifneq ($(firstword $(CHECK)),check=ok)
$(error $(CHECK))
endif
endif
comma := ,
checked = $(patsubst $(1)=%,%,$(filter $(1)=%,$(CHECK)))
checked_list = $(subst $(comma), ,$(call checked,$(1)))
# The data folders, as absolute paths (the stages' --*-root options).
PIPE = MDCR_PIPELINE_FROM_MAKE=1 $(call q,$(PY)) -m pipeline --corpora-root $(call q,$(call checked,CORPORA_ROOT)) \
	--index-root $(call q,$(call checked,INDEX_ROOT)) \
	--runs-root $(call q,$(call checked,RUNS_ROOT))
# MODEL's runs (with QUERY_VARIANT) and the model the stages load.
MODEL_NAME := $(call checked,MODEL_NAME)
MODEL_ARGS = --model $(call q,$(call checked,MODEL_FILE)) \
	$(if $(MODEL_PATH),--model-path $(call q,$(MODEL_PATH)))

.PHONY: help setup setup-gpu demo test test-fast lint variables download corpus pool pools training-ids \
	pools-paper retire-pool embed index search eval fuse report mdcr mdcr-jaccard import-mdcr export-mdcr \
	mdcr-scores import-beir import-irds import-csfcube import-run import-vectors verify sweep models clean-demo
.DELETE_ON_ERROR:

# The targets and their one-line descriptions: TARGETS in pipeline/cli/variables.py (standard
# library only, so it runs before the environment exists, like the check).
help:
	@$(call q,$(PYTHON)) -m pipeline targets

$(STAMP): pyproject.toml $(CONSTRAINTS)
	$(call q,$(PYTHON)) -m venv $(call q,$(VENV))
	$(call q,$(VENV)/bin/pip) install --quiet --upgrade pip
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
	$(call q,$(VENV)/bin/pip) install --quiet -e '.[gpu]'
	$(call q,$(VENV)/bin/pip) uninstall --quiet -y faiss-cpu
	$(call q,$(VENV)/bin/pip) install --quiet --force-reinstall --no-deps 'faiss-gpu-cu12>=1.10'

models: $(STAMP)
	@$(PIPE) models

# ---- corpus: synthesize (demo only), ingest, prefilter; pools -----------------------------
# make only chains the stages: each one is run and decides by content whether its outputs are
# current (same parameters, same input bytes, outputs that match their manifest). A current
# stage says so and does nothing; a stale, damaged or half-written output is made again. So a
# changed setting, a damaged file or a data folder moved elsewhere is handled the same way.
# A benchmark corpus (make mdcr, make import-mdcr) or an imported collection (make
# import-beir) has no raw input: the command that makes it writes it whole, and `corpus` has
# nothing to do for it (the check says which: WRITTEN_WHOLE).
# The S2AG datasets from the Semantic Scholar Datasets API (key: S2_API_KEY, never printed)
# into the folder make corpus SOURCE=s2ag reads (docs/ingest.md).
download: | $(STAMP)
	$(PIPE) download --corpus $(call q,$(CORPUS)) $(if $(RAW),--raw $(call q,$(RAW))) \
		--release $(call q,$(RELEASE)) --datasets $(call q,$(DATASETS)) \
		--parallel $(call q,$(PARALLEL)) $(if $(FIRST),--first $(call q,$(FIRST))) \
		$(if $(filter 1,$(UPDATE)),--update)

# The demo's synthetic corpus: DEMO_PAPERS and DEMO_SEED only when given (GIVEN), so that a
# command that does not name them uses the corpus as it is; given, they make it again.
DEMO_SETTINGS = --synth $(if $(filter DEMO_PAPERS,$(GIVEN)),$(call q,$(DEMO_PAPERS))) \
	$(if $(filter DEMO_SEED,$(GIVEN)),--synth-seed $(call q,$(DEMO_SEED)))

corpus: | $(STAMP)
ifeq ($(call checked,WRITTEN_WHOLE),)
	$(PIPE) corpus --corpus $(call q,$(CORPUS)) --raw $(call q,$(call checked,RAW_DIR)) \
		--source $(call q,$(SOURCE)) --fos-source $(call q,$(FOS_SOURCE)) \
		--workers $(call q,$(THREADS)) $(if $(filter 1,$(STRICT)),--strict) \
		--citations $(call q,$(CITATIONS)) $(if $(filter demo,$(CORPUS)),$(DEMO_SETTINGS))
endif

pool: corpus
	$(PIPE) pool --corpus $(call q,$(CORPUS)) --size $(call q,$(SIZE)) \
		$(if $(FIELD),--field $(call q,$(FIELD))) --repeats $(call q,$(REPEATS)) \
		--seed $(call q,$(SEED)) $(if $(QUERIES),--queries $(call q,$(QUERIES))) \
		$(if $(EXCLUDE),--exclude $(call q,$(EXCLUDE)))

# The paper's whole grid: dataset-level and field-level pools, test and validation splits.
pools-paper: corpus
	$(PIPE) pools-paper --corpus $(call q,$(CORPUS)) --paper-sizes $(call q,$(PAPER_SIZES)) \
		--paper-queries $(call q,$(PAPER_QUERIES)) \
		--paper-field-size $(call q,$(PAPER_FIELD_SIZE)) \
		--paper-field-queries $(call q,$(PAPER_FIELD_QUERIES)) \
		--paper-repeats $(call q,$(PAPER_REPEATS)) \
		--seed $(call q,$(SEED)) $(if $(EXCLUDE),--exclude $(call q,$(EXCLUDE)))

training-ids: | $(STAMP)
	$(PIPE) training-ids --src $(call q,$(SRC)) --paper-ids $(call q,$(PAPER_IDS)) \
		--out $(call q,$(OUT))

# Every pool of CORPUS that is stale, damaged or half-written, built again from its recorded
# parameters (what make eval does first).
pools: corpus
	$(PIPE) pool --corpus $(call q,$(CORPUS)) --repair

# A pool moved aside with its index and runs, into the corpus's retired/ folders (no stage
# reads them again; nothing is deleted): docs/pools.md#retiring-a-pool.
retire-pool: | $(STAMP)
	$(PIPE) retire-pool --corpus $(call q,$(CORPUS)) --pool $(call q,$(POOL))

# ---- per pool: index (Lucene / embeddings), search, eval ------------------------------------
# What each SLURM job asks for (THREADS CPUs per task), and the settings given on this make's
# command line, which the eval job after the embed array gets again.
SLURM_ARGS = --num-shards $(call q,$(SHARDS)) --gpus-per-task $(call q,$(GPUS_PER_TASK)) \
	$(if $(PARTITION),--partition $(call q,$(PARTITION))) \
	$(if $(SLURM_TIME),--time $(call q,$(SLURM_TIME))) --cpus-per-task $(call q,$(THREADS))
FORWARD = $(strip $(foreach v,$(filter-out EXECUTOR,$(USER_VARS)) TIME $(TOOL_VARS),\
	$(if $(filter command line,$(origin $(v))),$(v)=$(call q,$($(v))))))
# Not $(MAKE) itself: make -n would run a line naming it, and submit a job.
EVAL_MAKE := $(MAKE)

embed: pools
ifeq ($(EXECUTOR),slurm)
	$(PIPE) submit-embed --corpus $(call q,$(CORPUS)) $(MODEL_ARGS) $(SLURM_ARGS)
else
	$(PIPE) embed --corpus $(call q,$(CORPUS)) $(MODEL_ARGS) --num-shards $(call q,$(SHARDS))
endif

# One process searches every pool whose run is not current (one JVM for BM25, one model load
# for an encoder), then one process scores every run whose evaluation is not: each keeps what
# is current, checked by content (`--stale-only`), and redoes what is stale or damaged.
# SEARCH_WITH: the search settings of the commands that search several models (fuse, mdcr,
# mdcr-jaccard, demo: each model as make search does, in one process).
SEARCH_WITH = --threads $(call q,$(THREADS)) --bm25-engine $(call q,$(BM25_ENGINE)) \
	--backend $(call q,$(BACKEND)) --query-variant $(call q,$(QUERY_VARIANT)) \
	$(if $(MODEL_PATH),--model-path $(call q,$(MODEL_PATH)))
SEARCH_ARGS = --corpus $(call q,$(CORPUS)) $(MODEL_ARGS) --threads $(call q,$(THREADS)) \
	--bm25-engine $(call q,$(BM25_ENGINE)) --backend $(call q,$(BACKEND)) --index --stale-only \
	--query-variant $(call q,$(QUERY_VARIANT))

# Each stage on its own (to time it, or to run it as a batch job): `index` is a no-op for a
# pool whose index is current; `search` makes the runs that `eval` scores.
index: corpus
	$(PIPE) index --corpus $(call q,$(CORPUS)) $(MODEL_ARGS) --threads $(call q,$(THREADS)) \
		--bm25-engine $(call q,$(BM25_ENGINE)) --repair-pools

search: corpus
	$(PIPE) search $(SEARCH_ARGS) --repair-pools

ifeq ($(EXECUTOR),slurm)
# Every embed shard in: evaluate here; else submit the same `make eval` (EXECUTOR=local) as a
# job that starts when the embed array has succeeded.
eval: | $(STAMP)
	$(PIPE) after-embed --corpus $(call q,$(CORPUS)) --model $(call q,$(MODEL_NAME)) $(SLURM_ARGS) \
		-- $(EVAL_MAKE) --no-print-directory -C $(call q,$(CURDIR)) eval EXECUTOR=local $(FORWARD)
else
eval: search
	$(PIPE) eval --corpus $(call q,$(CORPUS)) --model $(call q,$(MODEL_NAME)) --stale-only \
		--metrics $(call q,$(METRICS)) --collect
endif

# Fusion: every component evaluated, then the fused model like any other (its runs are made
# from the components' runs of the same pool; see pipeline/retrieval/fusion.py), in one process.
fuse: corpus
	$(PIPE) fuse --corpus $(call q,$(CORPUS)) --models $(call q,$(MODELS)) \
		--method $(call q,$(METHOD)) $(SEARCH_WITH) --metrics $(call q,$(METRICS))

# ---- MDCR-style benchmarks (MDCR §4; pipeline/mdcr/) ------------------------------------------
# From this corpus's field-level test pools and the MDCR_MODELS' runs of them (searched first,
# --search): the benchmark corpus $(MDCR), which `make eval CORPUS=$(MDCR) MODEL=..` scores
# (Tables 3 and 4 in its report).
# REPLACE=1: the corpus written (MDCR, or CORPUS for an import) may replace one of its kind.
REPLACE_ARG = $(if $(filter 1,$(REPLACE)),--replace)
mdcr: corpus
	$(PIPE) mdcr --corpus $(call q,$(CORPUS)) --models $(call q,$(MDCR_MODELS)) \
		--out $(call q,$(MDCR)) --seed $(call q,$(SEED)) $(REPLACE_ARG) --search $(SEARCH_WITH)

mdcr-jaccard: corpus
	$(PIPE) mdcr-jaccard --corpus $(call q,$(CORPUS)) --models $(call q,$(MODELS)) \
		--seed $(call q,$(SEED)) --search $(SEARCH_WITH)

# A test collection in BEIR's layout (corpus.jsonl, queries.jsonl, qrels/<SPLIT>.tsv) as the
# corpus CORPUS with one pool; then make eval CORPUS=.. MODEL=.. (METRICS=auto: nDCG@10, R@100).
import-beir: | $(STAMP)
	$(PIPE) import-beir --corpus $(call q,$(CORPUS)) --src $(call q,$(SRC)) \
		--split $(call q,$(SPLIT)) $(REPLACE_ARG)

# An ir_datasets collection (DATASET=beir/scidocs: documents, queries, qrels; its files under
# IR_DATASETS_HOME) as the corpus CORPUS with one pool, as import-beir makes it.
import-irds: | $(STAMP)
	$(PIPE) import-irds --corpus $(call q,$(CORPUS)) --dataset $(call q,$(DATASET)) \
		--split $(call q,$(SPLIT)) $(REPLACE_ARG)

# The CSFCube release (test-pid2anns-csfcube-<facet>.json, abstracts-csfcube-preds.jsonl,
# queries-release.csv, evaluation_splits.json) as the corpus CORPUS with one pool per facet;
# then make eval CORPUS=.. MODEL=.. (METRICS=auto: NDCG%20 and MAP, as CSFCube scores them).
import-csfcube: | $(STAMP)
	$(PIPE) import-csfcube --corpus $(call q,$(CORPUS)) --src $(call q,$(SRC)) $(REPLACE_ARG)

# A TREC run made elsewhere as the run MODEL of POOL, checked against the pool; then make
# eval MODEL=.. scores it (pipeline/retrieval/imported.py).
import-run: | $(STAMP)
	$(PIPE) import-run --corpus $(call q,$(CORPUS)) --pool $(call q,$(POOL)) --run $(call q,$(RUN)) \
		--model $(call q,$(MODEL)) $(if $(filter 1,$(DROP_UNKNOWN)),--drop-unknown) $(REPLACE_ARG)

# Vectors computed elsewhere (SRC: parquet of corpusid, vector) as the store of the model
# vectors:MODEL; then make eval MODEL=vectors:.. searches them (pipeline/encoding/vectors.py).
import-vectors: | $(STAMP)
	$(PIPE) import-vectors --corpus $(call q,$(CORPUS)) --model $(call q,$(MODEL)) \
		--src $(call q,$(SRC)) --similarity $(call q,$(SIMILARITY))

# The official release's files: import them as CORPUS, export CORPUS into OUT, and write
# the official scores file of MODEL's runs (OUT=scores.json) after evaluating them.
import-mdcr: | $(STAMP)
	$(PIPE) import-mdcr --corpus $(call q,$(CORPUS)) --src $(call q,$(SRC)) \
		--split $(call q,$(SPLIT)) $(REPLACE_ARG)

export-mdcr: | $(STAMP)
	$(PIPE) export-mdcr --corpus $(call q,$(CORPUS)) --out $(call q,$(OUT)) \
		--split $(call q,$(SPLIT))

mdcr-scores: eval
	$(PIPE) mdcr-scores --corpus $(call q,$(CORPUS)) --model $(call q,$(MODEL_NAME)) \
		--out $(call q,$(OUT)) --split $(call q,$(SPLIT))

report: | $(STAMP)
	$(PIPE) report --corpus $(call q,$(CORPUS)) --seed $(call q,$(SEED)) --times \
		$(if $(EXCLUDE),--exclude $(call q,$(EXCLUDE))) \
		$(if $(TRAINING_SETS),--training-sets $(call q,$(TRAINING_SETS)))

verify: | $(STAMP)
	$(PIPE) verify

# Remove the temporaries of stopped processes (verify's DEBRIS).
sweep: | $(STAMP)
	$(PIPE) sweep

# ---- the two quick-start commands ------------------------------------------------------------
# Every stage of the demo corpus in one process, in make's order (corpus, pools, embed, each
# model's search and eval, the report with this run's stage times); DEMO_PAPERS and DEMO_SEED
# as for corpus: only when given.
demo: $(STAMP)
	$(PIPE) demo $(if $(filter DEMO_PAPERS,$(GIVEN)),--papers $(call q,$(DEMO_PAPERS))) \
		$(if $(filter DEMO_SEED,$(GIVEN)),--synth-seed $(call q,$(DEMO_SEED))) \
		--source $(call q,$(SOURCE)) --fos-source $(call q,$(FOS_SOURCE)) \
		--workers $(call q,$(THREADS)) $(if $(filter 1,$(STRICT)),--strict) \
		--citations $(call q,$(CITATIONS)) $(if $(RAW),--raw $(call q,$(RAW))) \
		--sizes $(call q,$(DEMO_SIZES)) $(if $(QUERIES),--queries $(call q,$(QUERIES))) \
		--fields $(call q,$(DEMO_FIELDS)) --field-size $(call q,$(DEMO_FIELD_SIZE)) \
		--field-queries $(call q,$(DEMO_FIELD_QUERIES)) --repeats $(call q,$(REPEATS)) \
		--seed $(call q,$(SEED)) --num-shards $(call q,$(SHARDS)) \
		--models $(call q,$(DEMO_MODELS)) $(SEARCH_WITH) --metrics $(call q,$(METRICS))

# ruff, then the import contracts (.importlinter: which layer of the package may import which).
lint: $(STAMP)
	$(call q,$(VENV)/bin/ruff) check pipeline tests benchmarks
	$(call q,$(VENV)/bin/lint-imports)

# The suite in TEST_WORKERS processes (pytest-xdist).
test: $(STAMP)
	$(call q,$(VENV)/bin/ruff) check pipeline tests benchmarks
	$(call q,$(PY)) -m pytest -q -n $(call q,$(TEST_WORKERS))

# The suite without the tests marked slow (the whole pipeline through make, a SLURM cluster).
test-fast: $(STAMP)
	$(call q,$(PY)) -m pytest -q -m "not slow" -n $(call q,$(TEST_WORKERS))

# pipeline/cli/variables.mk and docs/variables.md, written again from the variables'
# declaration (pipeline/cli/variables.py); standard library only, so no environment needed.
variables:
	$(call q,$(PYTHON)) -m pipeline variables --write

clean-demo:
	rm -rf $(foreach p,$(wildcard $(call checked_list,DEMO_PATHS)),$(call q,$(p)))
