"""Damage that keeps a file's size and mtime, for every kind of artifact verify knows: bytes
overwritten in place and the file's times put back (what a flipped disk block, a bad copy, a
stray `dd` followed by `touch -r` leave).

The repair contract (issue 30.2, 30.3), for each kind, on a copy of one complete data root
built through make and make's stages in Python (an ingested corpus with a test and a
validation pool, BM25 on Lucene with k1 and b tuned on the validation pool, the analysed-text
store, a dense encoder's store, runs of perturbed queries with their query vectors kept beside
the store, evaluations, results, and an imported BEIR-layout collection): the next stage that
reads the damaged file refuses it (exit status 2, one line naming it and the command that
repairs it, for this data folder);
`make verify DATA=<root>` names it with a command that includes the data folder; running each
command it names, exactly as printed (through make, as a user would), once, leaves verify clean
and every data file byte for byte as it was (Lucene's own files carry a random segment id:
checked through the runs searched from them).

Also (issue 30.4): after the raw shards change and `make corpus` runs, verify lists every
artifact made from the old corpus as stale, the analysed-text store too, and its repair makes it
current.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.inputs import Roots
from pipeline.verify import verify
from tests.conftest import CHILD_BOUND_S, built_once

ROOT = Path(__file__).resolve().parents[1]
# pools of 400 candidates (10 queries): what is damaged, refused, named and repaired does not
# depend on a pool's size, and every repair that embeds, indexes or tunes does half the work
# it did at 800
SIZE = 400
POOL = f"all-{SIZE}-r0"
MODEL_PATH: Path  # the tiny BERT of the fixture below
BEIR_SRC: Path  # the BEIR-layout folder the collection b was imported from


def cli(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pipeline", "--corpora-root", str(root / "corpora"),
            "--index-root", str(root / "indexes"), "--runs-root", str(root / "runs"), *args]


def tools(root: Path) -> list[str]:
    """What make needs besides the user's variables: this interpreter, the install stamp."""
    return [f"PY={sys.executable}", f"STAMP={root / 'installed'}", "THREADS=1"]


def make(root: Path, *args: str) -> list[str]:
    return ["make", "--no-print-directory", f"DATA={root}", *tools(root), *args]


ENV = {**os.environ, "MAKEFLAGS": "", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
       "TOKENIZERS_PARALLELISM": "false"}


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=ENV,
                          timeout=CHILD_BOUND_S)


def ok(cmd: list[str]) -> str:
    done = run(cmd)
    assert done.returncode == 0, (cmd, done.stdout[-1500:], done.stderr[-3000:])
    return done.stdout + done.stderr


def write_beir(corpus: Path, out: Path) -> Path:
    """A BEIR-layout folder: 200 papers of `corpus` as documents, 5 of their titles as queries,
    each judging 3 documents."""
    papers = pl.read_parquet(corpus / "prefiltered.parquet").head(200)
    out.mkdir(parents=True)
    with (out / "corpus.jsonl").open("w") as handle:
        handle.writelines(json.dumps({"_id": f"d{i}", "title": t, "text": a}) + "\n"
                          for i, t, a in papers.select("corpusid", "title", "abstract")
                          .iter_rows())
    with (out / "queries.jsonl").open("w") as handle:
        handle.writelines(json.dumps({"_id": f"q{n}", "text": papers["title"][n * 7]}) + "\n"
                          for n in range(5))
    (out / "qrels").mkdir()
    (out / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{n}\td{papers['corpusid'][n * 7 + j]}\t{1 + j % 2}\n" for n in range(5)
        for j in (0, 3, 11)))
    return out


def build_reference(place: Path, raw_corpus: Path, tiny_bert: Path) -> None:
    """Fill `place` with the data root `data` that `reference` describes, the tiny BERT it
    embeds with (`tiny-bert`, copied: the store records its path) and the BEIR-layout folder
    the collection b is imported from (`beir/src`)."""
    import pipeline
    from pipeline import layout

    root, model = place / "data", Path(shutil.copytree(tiny_bert, place / "tiny-bert"))
    shutil.copytree(raw_corpus, root / "corpora" / "c" / "s2orc")
    (root / "installed").touch()
    ok(make(root, "pool", "CORPUS=c", f"SIZE={SIZE}", "QUERIES=10"))
    pipeline.build_pool(root, "c", size=SIZE, queries=10, split="validation")
    ok(make(root, "eval", "CORPUS=c", "MODEL=bm25", "BM25_ENGINE=lucene"))
    pipeline.index(root, "c", None, "bm25", threads=1)  # the arrays engine's analysed-text store
    # the dense encoder's stages as make eval runs them (search with its pools repaired and
    # indexed first, then eval with --collect), here in Python: this process has loaded torch
    # and transformers already (the tiny BERT), a make eval would load them again, twice
    for variant in ("full", "title"):
        pipeline.search(root, "c", None, "scibert", threads=1, query_variant=variant,
                        model_path=model, repair_pools=True)
        pipeline.evaluate(root, "c", None, layout.run_name("scibert", variant), collect=True)
    source = write_beir(root / "corpora" / "c", place / "beir" / "src")
    pipeline.import_beir(root, source, corpus="b")
    pipeline.search(root, "b", None, "random", threads=1, repair_pools=True)
    pipeline.evaluate(root, "b", None, "random", collect=True)
    ok(make(root, "report", "CORPUS=c"))
    assert verify(Roots(root / "corpora", root / "indexes", root / "runs")) == []


@pytest.fixture(scope="module")
def reference(request, tmp_path_factory) -> Path:
    """A complete data root, built through make (the corpus, BM25 on Lucene, the report) and
    make's stages called in Python (the rest): the corpus c from its raw shards, a test pool
    and its validation pool (BM25 tunes k1 and b on it), BM25 on Lucene, the arrays engine's
    analysed-text store, a dense encoder (the tiny BERT, as `scibert`) with runs of title-only
    queries (their vectors kept beside the store), evaluations and results; and the BEIR-layout
    collection b, imported and searched. Built once per test run, shared by make test's
    workers (conftest's built_once: 44 s each before); each test damages its own copy."""
    global MODEL_PATH, BEIR_SRC
    place = built_once(tmp_path_factory, "damage-reference", lambda place: build_reference(
        place, request.getfixturevalue("raw_corpus"), request.getfixturevalue("tiny_bert")))
    MODEL_PATH, BEIR_SRC = place / "tiny-bert", place / "beir" / "src"
    return place / "data"


def data_files(root: Path) -> dict[str, bytes]:
    """Every data file's bytes: not manifests and records (they hold times: a run's, a tuning's,
    a query-vector cache's), logs, caches (collect's record of the stat keys it saw among them)
    or reports."""
    skip = ("manifest.json", ".eval.json", "stage-times.jsonl", ".lock", ".checksums.json",
            ".spec.json", ".results.collected.json")
    records = ("/bm25-tuning/", "/queries/", "/bm25/lucene/", "/reports/", "/slurm/")
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(skip) and p.name != "installed"
            and not (any(r in p.as_posix() for r in records) and not p.name.endswith(".npy"))}


def damage(path: Path) -> None:
    """64 bytes in the middle inverted, the size, mtime and atime put back as they were (what
    `touch -r` does): only the bytes (and the ctime, which no user can set) differ."""
    before = path.stat()
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def first(root: Path, pattern: str) -> Path:
    return max(root.glob(pattern), key=lambda p: p.stat().st_size)


def verify_lines(root: Path) -> list[str]:
    """`make verify DATA=<root>`'s lines, as a user sees them."""
    done = run(make(root, "verify"))  # verify's status 1 (problems found) is make's 2
    assert done.returncode == 0 or "verify] Error 1" in done.stderr, done.stderr[-2000:]
    return [line for line in done.stdout.splitlines()
            if line.split(" ", 1)[0] in ("CORRUPT", "PARTIAL", "STALE", "ORPHAN", "DEBRIS")]


def clean(root: Path) -> list:
    """What verify finds wrong under `root`, found in this process: after the repairs, whether
    `make verify` would print nothing (its lines are these problems; each test has already
    seen `make verify` print the damage), without another make and Python start."""
    return verify(Roots(root / "corpora", root / "indexes", root / "runs"))


def repair_of(line: str) -> str:
    """The command of a verify line or an error line, without the note after it."""
    return line.rsplit("; repair: ", 1)[1].split(" (")[0]


def run_repair(root: Path, command: str) -> None:
    """Run a repair command exactly as printed: make with its variables (plus the tools and,
    for the tiny BERT, its folder), or the pipeline's command line."""
    words = shlex.split(command)
    if words[0] == "make":
        extra = [f"MODEL_PATH={MODEL_PATH}"] if "MODEL=scibert" in words else []
        ok(["make", "--no-print-directory", *tools(root), *words[1:], *extra])
    else:
        assert words[:3] == ["python", "-m", "pipeline"], command
        ok([sys.executable, *words[1:]])


# (kind, the damaged file (a glob under the data root: the largest match), the reading stage,
# the repair command it must name: {data} is the data root, {src} the BEIR folder)
KINDS = [
    ("raw-shard", "corpora/c/s2orc/metadata/metadata_0.jsonl.gz",
     ["ingest", "--corpus", "c"], "python -m pipeline --corpora-root {data}/corpora "
     "--index-root {data}/indexes --runs-root {data}/runs synth --corpus c --repair"),
    ("papers", "corpora/c/papers.parquet", ["prefilter", "--corpus", "c"],
     "make corpus CORPUS=c DATA={data}"),
    ("citations", "corpora/c/citations.parquet", ["pool", "--corpus", "c", "--repair"],
     "make corpus CORPUS=c DATA={data}"),
    ("prefiltered", "corpora/c/prefiltered.parquet", ["pool", "--corpus", "c", "--repair"],
     "make corpus CORPUS=c DATA={data}"),
    ("corpus-manifest", "corpora/c/manifest.json", ["pool", "--corpus", "c", "--repair"],
     "make corpus CORPUS=c DATA={data}"),
    ("pool-file", f"corpora/c/pools/{POOL}/candidates.parquet",
     ["search", "--corpus", "c", "--model", "random"], "make pools CORPUS=c DATA={data}"),
    ("pool-manifest", f"corpora/c/pools/{POOL}/manifest.json",
     ["search", "--corpus", "c", "--model", "random"], "make pools CORPUS=c DATA={data}"),
    ("embedding-part", "indexes/c/embeddings/scibert/part-*.arrow",
     ["search", "--corpus", "c", "--model", "scibert"],
     "make embed CORPUS=c MODEL=scibert DATA={data}"),
    ("store-manifest", "indexes/c/embeddings/scibert/manifest.json",
     ["search", "--corpus", "c", "--model", "scibert"],
     "make embed CORPUS=c MODEL=scibert DATA={data}"),
    ("query-vectors", "indexes/c/embeddings/scibert/queries/*.npy",
     ["eval", "--corpus", "c", "--model", "scibert~title"],  # the run's options, as recorded
     "make eval CORPUS=c MODEL=scibert QUERY_VARIANT=title BACKEND=auto DATA={data}"),
    ("analysed-part", "indexes/c/bm25-analysed/anserini-english/part-*.arrow",
     ["search", "--corpus", "c", "--model", "bm25"], "make index CORPUS=c MODEL=bm25 DATA={data}"),
    ("analysed-manifest", "indexes/c/bm25-analysed/anserini-english/manifest.json",
     ["search", "--corpus", "c", "--model", "bm25"], "make index CORPUS=c MODEL=bm25 DATA={data}"),
    ("lucene-index", f"indexes/c/{POOL}/bm25/lucene/*",
     ["search", "--corpus", "c", "--model", "bm25", "--bm25-engine", "lucene"],
     "make eval CORPUS=c MODEL=bm25 BM25_ENGINE=lucene DATA={data}"),
    ("lucene-manifest", f"indexes/c/{POOL}/bm25/manifest.json",
     ["search", "--corpus", "c", "--model", "bm25", "--bm25-engine", "lucene"],
     "make eval CORPUS=c MODEL=bm25 BM25_ENGINE=lucene DATA={data}"),
    ("tuning", f"indexes/c/bm25-tuning/all-{SIZE}.json",
     ["eval", "--corpus", "c", "--model", "bm25"], "make eval CORPUS=c MODEL=bm25 DATA={data}"),
    ("run-parquet", f"runs/c/{POOL}/bm25.parquet", ["eval", "--corpus", "c", "--model", "bm25"],
     "make eval CORPUS=c MODEL=bm25 DATA={data}"),
    ("trec", f"runs/c/{POOL}/bm25.trec", ["eval", "--corpus", "c", "--model", "bm25"],
     "make eval CORPUS=c MODEL=bm25 DATA={data}"),
    ("run-manifest", f"runs/c/{POOL}/scibert.manifest.json",
     ["eval", "--corpus", "c", "--model", "scibert"],
     "make eval CORPUS=c MODEL=scibert DATA={data}"),
    ("metrics", f"runs/c/{POOL}/bm25.metrics.parquet", ["report", "--corpus", "c"],
     "make eval CORPUS=c MODEL=bm25 DATA={data}"),
    ("eval-manifest", f"runs/c/{POOL}/bm25.eval.json", ["report", "--corpus", "c"],
     "make eval CORPUS=c MODEL=bm25 DATA={data}"),
    ("collection-pool", "corpora/b/pools/*/candidates.parquet",
     ["search", "--corpus", "b", "--model", "random"],
     "make import-beir CORPUS=b SRC={src} SPLIT=test REPLACE=1 DATA={data}"),
    ("collection-pool-manifest", "corpora/b/pools/*/manifest.json",
     ["search", "--corpus", "b", "--model", "random"],
     "make import-beir CORPUS=b SRC={src} SPLIT=test REPLACE=1 DATA={data}"),
    ("collection-corpus", "corpora/b/prefiltered.parquet",
     ["search", "--corpus", "b", "--model", "random"],
     "make import-beir CORPUS=b SRC={src} SPLIT=test REPLACE=1 DATA={data}"),
]


@pytest.mark.parametrize("kind, pattern, reader, repair", KINDS, ids=[k[0] for k in KINDS])
def test_damage_is_refused_named_and_repaired_by_the_named_command(
        reference, tmp_path, kind, pattern, reader, repair):
    root = tmp_path / "data"
    shutil.copytree(reference, root, symlinks=True)
    repair = repair.format(data=root, src=BEIR_SRC)
    before = data_files(root)
    target = first(root, pattern)
    damage(target)
    done = run(cli(root, *reader))
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()
             and not line.startswith("[")]  # progress lines of the stage before it refused
    assert done.returncode == 2, (done.stdout[-1000:], done.stderr[-2000:])
    assert len(lines) == 1, lines
    assert target.name in lines[0] and repair_of(lines[0]) == repair, lines[0]
    problems = verify_lines(root)
    assert any(target.name in line and repair_of(line) == repair for line in problems), \
        problems
    # each command verify names, as printed, once: then nothing is left to repair
    for command in dict.fromkeys(repair_of(line) for line in problems):
        assert f"DATA={root}" in command or f"--corpora-root {root}/corpora" in command
        run_repair(root, command)
    assert clean(root) == []
    after = data_files(root)
    assert sorted(after) == sorted(before)
    assert [name for name in before if before[name] != after[name]] == []


def test_results_damage_is_named_and_repaired_by_collect(reference, tmp_path):
    """results.parquet is read by the report after `collect` writes it anew: verify names the
    damage and the command it names (collect, which no exclusion list can refuse, as make
    report can) repairs it."""
    root = tmp_path / "data"
    shutil.copytree(reference, root, symlinks=True)
    before = data_files(root)
    damage(root / "runs" / "results.parquet")
    problems = verify_lines(root)
    [line] = [p for p in problems if re.search(r"results\.parquet: .*; repair: python ", p)]
    assert repair_of(line) == (f"python -m pipeline --corpora-root {root}/corpora --index-root "
                               f"{root}/indexes --runs-root {root}/runs collect"), line
    run_repair(root, repair_of(line))
    assert data_files(root) == before
    assert clean(root) == []


def test_a_changed_corpus_makes_the_analysed_text_store_stale(reference, tmp_path):
    """Issue 30.4: the raw shards change (a paper's title, as a new release would have it) and
    `make corpus` runs: verify lists the pools, runs and the analysed-text store as stale, the
    store with its repair, and that repair makes it (and the pools) current again."""
    root = tmp_path / "data"
    shutil.copytree(reference, root, symlinks=True)
    raw = root / "corpora" / "c" / "s2orc"
    (raw / "manifest.json").unlink()  # a download, not shards the generator vouches for
    shard = raw / "metadata" / "metadata_0.jsonl.gz"
    kept = set(pl.read_parquet(root / "corpora" / "c" / "prefiltered.parquet")["corpusid"])
    lines = gzip.decompress(shard.read_bytes()).decode().splitlines()
    changed = next(i for i, line in enumerate(lines) if int(json.loads(line)["paper_id"]) in kept)
    paper = json.loads(lines[changed])
    lines[changed] = json.dumps({**paper, "title": f"{paper['title']} revised"})
    shard.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    ok(make(root, "corpus", "CORPUS=c"))
    store = root / "indexes" / "c" / "bm25-analysed" / "anserini-english" / "manifest.json"
    problems = verify_lines(root)
    assert any(line.startswith(f"STALE {root}/corpora/c/pools/{POOL}/") for line in problems)
    assert any(line.startswith(f"STALE {root}/runs/c/{POOL}/bm25.") for line in problems)
    [line] = [p for p in problems if p.startswith(f"STALE {store}:")]
    assert "prefiltered.parquet changed since" in line, line
    assert repair_of(line) == f"make index CORPUS=c MODEL=bm25 DATA={root}", line
    run_repair(root, repair_of(line))
    left = verify_lines(root)
    assert not [p for p in left if p.split()[1].startswith((str(store.parent), str(
        root / "corpora" / "c" / "pools")))], left
    assert left, "the runs are still stale: only the store and the pools were repaired"


# ---- artifacts only their user can make again (issue 46): a pipeline.Encoder's store and
# runs, runs and vectors imported from files of the user's (in folders with spaces), and a
# pool retired. Each repair verify prints runs as printed and leaves verify clean: make
# commands through make; the Python call it names, with the object (the test's own Hashed
# encoder); a placeholder for the user's file filled with that file, quoted.

OWNED_POOLS = (POOL, f"all-{SIZE}-s2-r0")
MINE: Path  # the user's folder of run and vector files (its name holds a space)
LISTED: Path  # the list of papers the third pool's queries were drawn without
LISTS = "never-queries.txt"  # its name


def encoder(name: str = "good"):
    import pipeline
    from tests.encoding.test_objects import Hashed

    return pipeline.Encoder(Hashed(), name=name, similarity="ip", fingerprint="v1")


def build_owned(place: Path, corpus_dir: Path) -> None:
    """Fill `place` with the data root `data` that `owned` describes and the user's files it
    was made from (`user/`: the folder `my runs`, the list `never-queries.txt`)."""
    import numpy as np

    import pipeline
    from tests.conftest import copy_corpus

    root, mine, listed = place / "data", place / "user" / "my runs", place / "user" / LISTS
    corpus = copy_corpus(corpus_dir, root / "corpora" / "c")
    (root / "installed").touch()
    mine.mkdir(parents=True)
    for seed in (0, 2):
        pipeline.build_pool(root, "c", size=SIZE, queries=10, seed=seed)
    listed.write_text(f"{pl.read_parquet(corpus / 'pools' / POOL / 'queries.parquet')[0, 0]}\n")
    pipeline.build_pool(root, "c", size=SIZE, queries=10, exclude=str(listed))
    for pool in OWNED_POOLS:
        pipeline.search(root, "c", pool, encoder(), threads=1)
        pipeline.evaluate(root, "c", pool, encoder())
        pipeline.search(root, "c", pool, "random", threads=1)
        shutil.copy(root / "runs" / "c" / pool / "random.trec", mine / f"{pool} run.trec")
        pipeline.import_run(root, "c", pool, mine / f"{pool} run.trec", "same")
    papers = pl.read_parquet(corpus / "prefiltered.parquet", columns=["corpusid"])
    vectors = np.random.default_rng(0).normal(size=(papers.height, 8)).astype(np.float32)
    source = mine / "my vectors.parquet"
    papers.with_columns(vector=pl.Series(vectors.tolist())).write_parquet(source)
    pipeline.import_vectors(root, "c", "vec", source)
    for model in ("same", "vectors:vec", "random"):  # make eval's stages: search (an imported
        if model != "same":  # run has nothing to search), then eval
            pipeline.search(root, "c", None, model, threads=1, repair_pools=True)
        pipeline.evaluate(root, "c", None, model, collect=True)
    assert verify(Roots(root / "corpora", root / "indexes", root / "runs")) == []



@pytest.fixture(scope="module")
def owned(request, tmp_path_factory) -> Path:
    """A data root of corpus c with two pools (and a third, drawn without a list of queries, to
    retire): a pipeline.Encoder's store and runs (`good`), a run imported into each pool from a
    file whose path holds spaces (`same`), vectors imported from such a file (`vec`), each
    evaluated, with random's runs. Built once per test run, shared by make test's workers
    (as `reference`); each test damages its own copy."""
    global MINE, LISTED
    place = built_once(tmp_path_factory, "damage-owned", lambda place: build_owned(
        place, request.getfixturevalue("corpus_dir")))
    MINE, LISTED = place / "user" / "my runs", place / "user" / LISTS
    return place / "data"


def run_owned_repair(root: Path, command: str) -> None:
    """Run a repair as printed: the Python calls it names with the encoder object, or the make
    or pipeline command with the user's file in place of its placeholder (quoted)."""
    import pipeline

    if command.startswith("in Python"):
        found = re.search(r"pipeline\.search\(<data>, '(\w+)', ('[\w-]+'|<each pool>), "
                          r"<the pipeline\.Encoder or ModelEntry named '(\w+)'>\)", command)
        assert found, command
        corpus, pool, name = found.groups()
        pools = pipeline.Data(root).pools(corpus) if pool == "<each pool>" else [pool[1:-1]]
        for each in pools:
            if each in OWNED_POOLS:  # the pools it searched (an Encoder searches where asked)
                pipeline.search(root, corpus, each, encoder(name), threads=1)
                if "then pipeline.evaluate(<data>" in command:
                    pipeline.evaluate(root, corpus, each, encoder(name))
        return
    pool = re.search(r"POOL=(\S+)", command)
    run_file = shlex.quote(str(MINE / f"{pool and pool.group(1)} run.trec"))
    command = re.sub(r" \([^()]*\)$", "", command).replace(  # the note after it
        "<the TREC run file it was imported from>", run_file).replace(
        "<the parquet file of the vectors>", shlex.quote(str(MINE / "my vectors.parquet"))).replace(
        "<a list whose pools remain, or none>", "none")
    assert "<" not in command, command
    run_repair(root, command)


OWNED = [
    ("encoder-part", "indexes/c/embeddings/good/part-*.arrow"),
    ("encoder-store-manifest", "indexes/c/embeddings/good/manifest.json"),
    ("encoder-run", f"runs/c/{POOL}/good.parquet"),
    ("encoder-run-manifest", f"runs/c/{POOL}/good.manifest.json"),
    ("encoder-evaluation", f"runs/c/{POOL}/good.eval.json"),
    ("imported-run", f"runs/c/{POOL}/same.trec"),
    ("imported-run-manifest", f"runs/c/{POOL}/same.manifest.json"),
    ("imported-evaluation", f"runs/c/{POOL}/same.metrics.parquet"),
    ("imported-vectors-part", "indexes/c/embeddings/vectors--vec/part-*.arrow"),
    ("imported-vectors-manifest", "indexes/c/embeddings/vectors--vec/manifest.json"),
]


@pytest.mark.parametrize("kind, pattern", OWNED, ids=[k[0] for k in OWNED])
def test_damage_to_what_only_its_user_can_make_is_repaired_as_printed(owned, tmp_path, kind,
                                                                       pattern):
    root = tmp_path / "data"
    shutil.copytree(owned, root, symlinks=True)
    before = data_files(root)
    target = first(root, pattern)
    damage(target)
    problems = verify_lines(root)
    assert any(line.startswith(f"CORRUPT {target}") for line in problems), problems
    for command in dict.fromkeys(line.split("; repair: ", 1)[1] for line in problems):
        run_owned_repair(root, command)
    assert clean(root) == []
    after = data_files(root)
    assert sorted(after) == sorted(before)
    # (a store's coverage records, embeddings/<model>/pools/<pool>.json, list the parts that
    # hold a pool's papers as the searches made them, in that order: records, not data)
    assert [name for name in before if before[name] != after[name]
            and "/embeddings/good/pools/" not in name] == []


def test_make_eval_refuses_an_imported_run_whose_manifest_is_damaged(owned, tmp_path):
    """It left that pool out and said the others' evaluations were current, while verify named
    the manifest: a loop. Now refused in one line with the command that imports it again."""
    root = tmp_path / "data"
    shutil.copytree(owned, root, symlinks=True)
    manifest = root / "runs" / "c" / POOL / "same.manifest.json"
    damage(manifest)
    done = run(make(root, "eval", "CORPUS=c", "MODEL=same"))
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert f"{manifest} is corrupt" in lines[0]
    assert repair_of(lines[0]) == (f"make import-run CORPUS=c MODEL=same POOL={POOL} "
                                   "RUN=<the TREC run file it was imported from> REPLACE=1 "
                                   f"DATA={root}")  # its manifest held the file's path


def test_a_retired_pools_repairs_run_as_printed(owned, tmp_path):
    """After make retire-pool, results.parquet is stale: the repair verify names (it was make
    report, which refuses a corpus whose pools were drawn without different lists: here none
    and a second list's) runs and leaves verify clean, with the pool's numbers kept in
    retired/. The report made from the retired list's pools, damaged, names make report with
    the list to report left to the user (its recorded list has no pool left: make report
    would refuse it)."""
    root = tmp_path / "data"
    shutil.copytree(owned, root, symlinks=True)
    retired = next(p for p in os.listdir(root / "corpora" / "c" / "pools")
                   if "-x" in p and not p.startswith("."))
    other = tmp_path / "other-list.txt"
    queries = pl.read_parquet(root / "corpora" / "c" / "pools" / POOL / "queries.parquet")
    other.write_text(f"{queries[1, 0]}\n")
    ok(make(root, "pool", "CORPUS=c", f"SIZE={SIZE}", "QUERIES=10", f"EXCLUDE={other}"))
    ok(make(root, "eval", "CORPUS=c", "MODEL=random"))
    ok(make(root, "report", "CORPUS=c", f"EXCLUDE={LISTED}"))
    kept = (root / "runs" / "c" / retired / "random.metrics.parquet").read_bytes()
    ok(make(root, "retire-pool", "CORPUS=c", f"POOL={retired}"))
    damage(root / "runs" / "reports" / "c.md")
    problems = verify_lines(root)
    assert {p.split(":")[0] for p in problems} == {  # the report showed the retired pool's runs
        f"STALE {root}/runs/results.manifest.json", f"CORRUPT {root}/runs/reports/c.md",
        f"STALE {root}/runs/reports/c.manifest.json"}, problems
    for command in dict.fromkeys(line.split("; repair: ", 1)[1] for line in problems):
        run_owned_repair(root, command)
    assert clean(root) == []
    assert (root / "runs" / "c" / "retired" / retired / "random.metrics.parquet").read_bytes() \
        == kept
