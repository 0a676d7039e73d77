# Generated from pipeline/cli/variables.py by `make variables`: do not edit.
# The user variables of the Makefile, with their defaults: a value on make's command line or in the
# environment wins. The Makefile passes every variable of USER_VARS to `python -m pipeline check`,
# which checks it and prints the names and paths make uses (docs/variables.md).

# ---- Corpus and data folders
# CORPUS: the corpus every stage works on: its folder under corpora/, indexes/ and runs/
CORPUS ?= demo
# DATA: where corpora/, indexes/ and runs/ live (a scratch disk on a cluster, say); default the
# checkout
DATA ?= .
# CORPORA_DIR: the corpora folder, where it is not DATA's corpora/ (the stages' --corpora-root)
# (default: DATA/corpora)
CORPORA_DIR ?=
# INDEX_DIR: the indexes folder, where it is not DATA's indexes/ (the stages' --index-root)
# (default: DATA/indexes)
INDEX_DIR ?=
# RUNS_DIR: the runs folder, where it is not DATA's runs/ (the stages' --runs-root) (default:
# DATA/runs)
RUNS_DIR ?=
# SOURCE: the reader: the S2ORC 2020 release (s2orc) or the S2AG datasets (s2ag: papers/,
# abstracts/, citations/) (default: s2orc; s2ag when CORPUS=s2ag)
SOURCE ?= $(if $(filter s2ag,$(CORPUS)),s2ag,s2orc)
# RAW: the folder of the raw release: S2ORC's metadata/, or S2AG's papers/, abstracts/ and
# citations/ (default: the corpus's SOURCE folder under DATA (corpora/CORPUS/SOURCE))
RAW ?=
# FOS_SOURCE: S2AG: which field labels count: external (MAG-like) or s2-fos-model
FOS_SOURCE ?= external
# RELEASE: make download: the S2AG release, a date (2026-11-18) or latest (recorded as its date)
RELEASE ?= latest
# DATASETS: make download: the S2AG datasets, separated by commas
DATASETS ?= papers,abstracts,citations
# FIRST: make download: a trial, only the first FIRST files of each dataset (empty: every file)
# (default: every file)
FIRST ?=
# UPDATE: 1: make download brings a folder holding an older release to RELEASE with the API's diffs
# (then make corpus ingests again)
UPDATE ?=
# PARALLEL: make download: files downloaded at once
PARALLEL ?= 4
# CITATIONS: what the prefilter counts as a paper's citations: inbound, outbound or either
CITATIONS ?= inbound
# STRICT: 1: stop ingest at the first bad line instead of quarantining it
STRICT ?=

# ---- Pools (make pool)
# SIZE: the pool size: 20000, 20k, 2M; several separated by spaces
SIZE ?= 10k
# FIELD: a field-level pool: one of the 19 MAG fields (case insensitive), all, or several separated
# by spaces with '-' for a name's own space (medicine computer-science) (default: (empty: a
# dataset-level pool))
FIELD ?=
# REPEATS: samples per size (the paper: 3)
REPEATS ?= 1
# SEED: the pools' seed, part of a pool's name unless 0 (two seeds never overwrite each other); also
# the random model's and make mdcr's
SEED ?= 0
# QUERIES: query papers per pool (default: 50 on CORPUS=demo, else the paper's: 3,800 dataset-level,
# 200 per field)
QUERIES ?= $(if $(filter demo,$(CORPUS)),50,)
# EXCLUDE: papers never used as queries (the paper: SPECTER's and SciNCL's training papers): a file
# of CorpusIDs, one per line or a JSON list; its ids name the pools (-x<tag>), and make report shows
# the pools of this list (default: (empty: no paper left out))
EXCLUDE ?=
# POOL: make retire-pool: the pool to retire, e.g. one whose EXCLUDE list changed (make verify names
# them); make import-run: the pool the run ranks
POOL ?=
# PAPER_IDS: make training-ids: the folder of S2AG's paper-ids dataset (SHA -> CorpusID)
PAPER_IDS ?=

# ---- Models
# MODEL: one model: a registered name (make models lists them), hf:<org>/<name> (any Hugging Face
# encoder, with POOLING), vectors:<name> (make import-vectors), or a fused model's name; make
# import-vectors: the name of the vectors
MODEL ?= minilm
# POOLING: cls or mean, for MODEL=hf:<org>/<name> (default: mean)
POOLING ?=
# PRECISION: the encoder's floating-point precision: fp32 (the authors' references), bf16 or fp16
# (GPU only) for speed; a run in another precision is the model <name>+bf16, never mixed with fp32
# runs
PRECISION ?= fp32
# MODEL_PATH: a local folder with the model's save_pretrained files, for nodes without hub access
MODEL_PATH ?=
# SIMILARITY: make import-vectors: how a search compares the imported vectors: cosine, ip (inner
# product) or l2 (recorded in their store)
SIMILARITY ?= cosine

# ---- Search
# THREADS: ingest worker processes, Lucene and search threads; with EXECUTOR=slurm also each job's
# CPUs (--cpus-per-task)
THREADS ?= 2
# BM25_ENGINE: BM25 on arrays (Lucene's analysis and scores in numba, faster for whole-abstract
# queries) or on lucene (Anserini): the same runs, so a change redoes none
BM25_ENGINE ?= arrays
# BACKEND: the dense search backend: auto, faiss-cpu, faiss-gpu, torch-cuda, torch-cpu (a forced one
# that cannot run is an error; the run manifest says which ran)
BACKEND ?= auto
# QUERY_VARIANT: the same pools searched with perturbed queries: full, title, abstract, shuffled,
# deleted30, typos (pipeline/pools/queries.py); their runs are named after the model and the
# variant, beside the others
QUERY_VARIANT ?= full

# ---- Evaluation and fusion (make eval, make fuse)
# TRAINING_SETS: make report: each model's training papers, <model>=<file> separated by spaces
# (files as for EXCLUDE): the share of every pool's queries and positives in them (leakage)
# (default: (empty: no leakage table))
TRAINING_SETS ?=
# METRICS: what eval scores: auto (each pool's own set: large-scale pools MAP, NDCG, R@30;
# MDCR-style pools MAP, NDCG, R@5), a set (large-scale, mdcr, beir: nDCG@10, R@100; csfcube:
# NDCG%20, MAP of grades >= 2) or ranx names, e.g. 'map ndcg@10 recall@30'
METRICS ?= auto
# MODELS: make fuse, make mdcr-jaccard: the models, separated by commas (MODELS=bm25,minilm; an hf:
# model's pooling as hf:<org>/<name>@cls)
MODELS ?=
# METHOD: make fuse: ranx's fusion method (rrf, wsum, sum, mnz, ...)
METHOD ?= rrf
# RUN: make import-run: the TREC run file made elsewhere (qid Q0 docid rank score tag per line),
# imported as the run MODEL of POOL
RUN ?=
# DROP_UNKNOWN: 1: make import-run drops (and counts) the lines naming a query or paper POOL does
# not have, instead of refusing the run
DROP_UNKNOWN ?=

# ---- MDCR-style benchmarks and outside collections
# MDCR: make mdcr: the benchmark corpus it writes (default: CORPUS-mdcr)
MDCR ?= $(CORPUS)-mdcr
# MDCR_MODELS: make mdcr: the models whose top-ranked papers give the model-based negatives,
# separated by commas (the paper's: bm25,specter,scincl; make mdcr-jaccard MODELS=.. helps choose)
MDCR_MODELS ?= bm25,minilm
# SRC: make import-mdcr, make import-beir, make import-csfcube: the folder of files to import
# (import-csfcube: the CSFCube release); make import-vectors: the parquet file of the vectors
# (columns corpusid, vector)
SRC ?=
# OUT: make export-mdcr: the folder it writes; make mdcr-scores: the scores file
OUT ?=
# DATASET: make import-irds: the ir_datasets id of the collection to import (beir/scidocs,
# nfcorpus/test, ...: https://ir-datasets.com)
DATASET ?=
# SPLIT: the split imported or exported: test, val (MDCR) or dev (BEIR)
SPLIT ?= test
# REPLACE: 1: make mdcr, import-mdcr, import-beir and import-csfcube may replace an existing corpus
# of the same kind (without it they refuse to write into a corpus that holds anything); make
# import-run may replace a run imported under MODEL from another file
REPLACE ?=

# ---- Where embed runs (make embed, make eval; on a SLURM cluster: docs/cluster.md)
# EXECUTOR: where embed runs: local (this machine; the SHARDS one after another in one process) or
# slurm (an sbatch job array under runs/slurm/, one shard per task; make eval then waits for it)
EXECUTOR ?= local
# SHARDS: shards of the embed stage: array tasks with slurm, one after another with local
SHARDS ?= 1
# PARTITION: #SBATCH --partition: one name, or several separated by commas (default: the cluster's
# default)
PARTITION ?=
# GPUS_PER_TASK: #SBATCH --gres=gpu:K of each task (and of the eval job); 0 asks for none
GPUS_PER_TASK ?= 1
# SLURM_TIME: #SBATCH --time of each job, e.g. 90 (minutes), 4:00:00, 1-12:00:00; TIME=.. on make's
# command line is an alias (a TIME in the environment, GNU time's format, is never read) (default:
# the cluster's default)
SLURM_TIME ?=

# ---- make demo
# DEMO_PAPERS: papers of the synthetic demo corpus, for a new one or when given (then the corpus is
# made again with it); not given, a command uses the corpus as it is
DEMO_PAPERS ?= 120k
# DEMO_SIZES: the demo's dataset-level pool sizes
DEMO_SIZES ?= 2k 5k 10k
# DEMO_MODELS: the models make demo evaluates, separated by spaces
DEMO_MODELS ?= bm25 minilm random
# DEMO_SEED: the synthetic demo corpus's seed, as DEMO_PAPERS: given, the corpus is made again with
# it
DEMO_SEED ?= 0
# DEMO_FIELDS: a small Table 2: the fields of the demo's field-level pools (names with '-' for
# spaces; empty: none)
DEMO_FIELDS ?= medicine biology computer-science
# DEMO_FIELD_SIZE: the size of the demo's field-level pools
DEMO_FIELD_SIZE ?= 1k
# DEMO_FIELD_QUERIES: queries per demo field-level pool
DEMO_FIELD_QUERIES ?= 25

# ---- The paper's grid (make pools-paper)
# PAPER_SIZES: dataset-level pool sizes (MDCR section 3)
PAPER_SIZES ?= 200k 500k 1M 2M
# PAPER_QUERIES: queries per dataset-level pool
PAPER_QUERIES ?= 3800
# PAPER_FIELD_SIZE: the size of the field-level pools (all 19 fields)
PAPER_FIELD_SIZE ?= 100k
# PAPER_FIELD_QUERIES: queries per field-level pool
PAPER_FIELD_QUERIES ?= 200
# PAPER_REPEATS: samples per size
PAPER_REPEATS ?= 3

# ---- The test suite (make test, make test-fast)
# TEST_WORKERS: test processes (pytest-xdist), 1 to 4 per CPU core; each builds the session's
# fixture corpora itself, up to 1.3 GiB resident each as measured; pytest's own options go in
# PYTEST_ADDOPTS
TEST_WORKERS ?= 2

USER_VARS := CORPUS DATA CORPORA_DIR INDEX_DIR RUNS_DIR SOURCE RAW FOS_SOURCE RELEASE DATASETS \
	FIRST UPDATE PARALLEL CITATIONS STRICT SIZE FIELD REPEATS SEED QUERIES EXCLUDE POOL \
	MODEL POOLING PRECISION MODEL_PATH SIMILARITY THREADS BM25_ENGINE BACKEND \
	QUERY_VARIANT PAPER_IDS TRAINING_SETS METRICS MODELS METHOD MDCR MDCR_MODELS SRC OUT \
	DATASET SPLIT REPLACE RUN DROP_UNKNOWN EXECUTOR SHARDS PARTITION GPUS_PER_TASK \
	SLURM_TIME DEMO_PAPERS DEMO_SIZES DEMO_MODELS DEMO_SEED DEMO_FIELDS DEMO_FIELD_SIZE \
	DEMO_FIELD_QUERIES PAPER_SIZES PAPER_QUERIES PAPER_FIELD_SIZE PAPER_FIELD_QUERIES \
	PAPER_REPEATS TEST_WORKERS
