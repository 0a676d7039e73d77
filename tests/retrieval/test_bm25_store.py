"""BM25's analysed-text store: runs byte-identical whether a pool's index came from the store,
from a fresh analysis or from Lucene, for nested pools and repeats; each paper analysed once;
parts checked, repaired, resumed; a store from another corpus file refused."""

from __future__ import annotations

import os
import re

import numpy as np
import polars as pl
import pytest

from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.inputs import Roots
from pipeline.corpus.files import paper_texts
from pipeline.layout import Place, run_paths
from pipeline.models import get_model
from pipeline.pools.build import PoolSpec, build_pool, load_pool
from pipeline.retrieval.bm25 import analysis as bm25_analysis
from pipeline.retrieval.bm25 import arrays as bm25_arrays
from pipeline.retrieval.bm25 import store as bm25_store
from pipeline.retrieval.search import index, search_pool
from pipeline.verify import verify
from tests.conftest import copy_corpus
from tests.retrieval.bm25_fresh import search_papers

POOLS = [f"all-{size}-s3-r{repeat}" for size in (300, 700) for repeat in (0, 1)]


@pytest.fixture(scope="module")
def corpus(corpus_dir, tmp_path_factory):
    """A private corpus with nested pools (300 in 700) and two repeats of each."""
    corpus = copy_corpus(corpus_dir, tmp_path_factory.mktemp("store") / "small")
    for size in (300, 700):
        for repeat in (0, 1):
            build_pool(corpus, PoolSpec(size=size, queries=15, repeat=repeat, seed=3))
    return corpus


def triples(index: bm25_arrays.Postings) -> pl.DataFrame:
    """An index as (doc id, term, tf) rows, whatever its term numbering."""
    terms = index.vocab.sort("term_id")["term"].to_numpy()
    per_term = np.repeat(np.arange(len(index.ptr) - 1), np.diff(index.ptr))
    return pl.DataFrame({"doc": index.ids[index.docs], "term": terms[per_term],
                         "tf": index.tfs}).sort("doc", "term")


def test_runs_are_byte_identical_from_the_store_a_fresh_analysis_and_lucene(corpus, tmp_path):
    entry = get_model("bm25")
    place = Place(corpus, tmp_path / "idx", tmp_path / "runs")
    analysed = []
    for pool in POOLS:
        info = search_pool(place, pool, entry, threads=2)
        analysed.append(info["details"]["analysed_text_store"])
        index(place, pool, entry, 1, bm25_engine="lucene")
        search_pool(Place(corpus, place.index_root, tmp_path / "lucene"), pool, entry, threads=2,
               bm25_engine="lucene")
        store_run = run_paths(tmp_path / "runs", corpus.name, pool, "bm25")
        lucene_run = run_paths(tmp_path / "lucene", corpus.name, pool, "bm25")
        for suffix in ("trec", "parquet"):
            assert store_run.of(suffix).read_bytes() == lucene_run.of(suffix).read_bytes(), pool
        # the store's hits equal a fresh analysis of every text, score for score
        queries, candidates, _ = load_pool(corpus, pool)
        texts = paper_texts(corpus, queries["corpusid"]).sort("corpusid")
        fresh, _ = search_papers(texts, paper_texts(corpus, candidates["corpusid"]), 501,
                                 [0.9], [0.4])
        stored, _, _ = bm25_store.search_grid(place, pool, texts, True, candidates["corpusid"],
                                              501, [0.9], [0.4])
        assert fresh[(0.9, 0.4)].equals(stored[(0.9, 0.4)])
    # each paper is analysed once: the first pool analyses all of its papers, the nested and
    # repeated pools after it only those no earlier pool had
    assert analysed[0]["reused"] == 0 and analysed[0]["analysed"] == analysed[0]["papers"]
    assert all(a["reused"] > 0 for a in analysed[1:])
    union = pl.concat([pl.concat([load_pool(corpus, p)[0]["corpusid"],
                                  load_pool(corpus, p)[1]["corpusid"]]) for p in POOLS])
    assert sum(a["analysed"] for a in analysed) == union.n_unique()
    again = search_pool(Place(corpus, place.index_root, tmp_path / "again"), POOLS[-1], entry)
    assert again["details"]["analysed_text_store"]["analysed"] == 0  # a rerun analyses nothing


def test_the_store_is_invariant_to_parts_and_order_of_filling(corpus, tmp_path):
    _, candidates, _ = load_pool(corpus, POOLS[-1])
    ids = candidates["corpusid"].to_numpy()
    # in two steps, in parts of 37 papers, against one fill in one part
    a, b = (Place(corpus, tmp_path / name, tmp_path / "runs") for name in ("a", "b"))
    bm25_store.fill(a, ids[::3], threads=1, part_size=37)
    filled = bm25_store.fill(a, ids, threads=2, part_size=37)
    assert filled["reused"] == len(np.unique(ids[::3]))
    bm25_store.fill(b, ids, threads=2)
    stores = [bm25_store.store_path(tmp_path / r, corpus.name) for r in ("a", "b")]
    assert len(read_json(stores[0] / "manifest.json")["parts"]) > 10
    shuffled = np.random.default_rng(0).permutation(ids)
    a = triples(bm25_store.pool_index(stores[0], shuffled))
    b = triples(bm25_store.pool_index(stores[1], ids))
    papers = paper_texts(corpus, candidates["corpusid"])
    fresh = triples(bm25_arrays.build(papers["corpusid"].to_numpy(),
                                      bm25_analysis.paper_text(papers).to_list()))
    assert a.equals(b) and a.equals(fresh) and a.height > 10 * len(ids)


def test_index_honours_part_size(corpus, tmp_path):
    """`index --model bm25 --part-size N` cuts the store in parts of N papers (it was accepted
    and ignored); with the Lucene engine, which has no parts, it is refused."""
    import subprocess
    import sys

    def run(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pipeline", "--corpora-root",
                               str(corpus.parent), "--index-root", str(tmp_path / "idx"),
                               "index", "--corpus", corpus.name, "--model", "bm25", "--pool",
                               POOLS[-1], *extra], capture_output=True, text=True)

    done = run("--part-size", "100")
    assert done.returncode == 0, done.stderr[-2000:]
    store = bm25_store.store_path(tmp_path / "idx", corpus.name)
    parts = read_json(store / "manifest.json")["parts"]
    queries, candidates, _ = load_pool(corpus, POOLS[-1])
    papers = pl.concat([queries["corpusid"], candidates["corpusid"]]).n_unique()
    assert len(parts) == -(-papers // 100) and max(p["rows"] for p in parts) == 100
    done = run("--part-size", "100", "--bm25-engine", "lucene")
    assert done.returncode == 2 and "leave it out" in done.stderr


def test_a_damaged_or_orphan_part_is_refused_then_repaired_by_index(corpus, tmp_path):
    entry = get_model("bm25")
    pool = POOLS[0]
    place = Place(corpus, tmp_path, tmp_path / "runs")
    search_pool(place, pool, entry)
    before = run_paths(tmp_path / "runs", corpus.name, pool, "bm25").trec.read_bytes()
    store = bm25_store.store_path(tmp_path, corpus.name)
    part = store / read_json(store / "manifest.json")["parts"][0]["file"]
    data = bytearray(part.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 4] = b"\xff\xfe\xfd\xfc"  # same size
    part.write_bytes(bytes(data))
    with pytest.raises(InputError, match=f"repair: make index CORPUS={corpus.name} MODEL=bm25"):
        search_pool(place, pool, entry)
    roots = Roots(corpus.parent, tmp_path, tmp_path / "runs")
    problems = verify(roots, [tmp_path / corpus.name])  # the store alone
    assert problems == [f"CORRUPT {part}: bytes differ from the manifest's checksum (corrupt); "
                        f"repair: make index CORPUS={corpus.name} MODEL=bm25 "
                        f"CORPORA_DIR={corpus.parent} INDEX_DIR={tmp_path} "
                        f"RUNS_DIR={tmp_path / 'runs'}"]
    (store / "part-0123456789abcdef.arrow").write_bytes(b"left by a kill")  # an orphan
    info = index(place, pool, entry, 1)
    assert info["damaged_parts"] == 1 and info["orphan_parts"] == 1 and info["analysed"] > 0
    assert not (store / "part-0123456789abcdef.arrow").exists()
    search_pool(place, pool, entry)
    assert run_paths(tmp_path / "runs", corpus.name, pool, "bm25").trec.read_bytes() == before


def test_damage_with_its_mtime_put_back_is_repaired_by_index(corpus, tmp_path):
    """Issue 30.2: same-size damage to a part whose mtime was put back (`touch -r`): verify
    names `make index`, and the index stage it runs finds the damage (it trusted the kept
    hash before: 0 papers analysed, verify CORRUPT for ever) and analyses those papers again."""
    entry = get_model("bm25")
    pool = POOLS[0]
    place = Place(corpus, tmp_path, tmp_path / "runs")
    index(place, pool, entry, 1)
    store = bm25_store.store_path(tmp_path, corpus.name)
    part = store / read_json(store / "manifest.json")["parts"][0]["file"]
    before, stat = part.read_bytes(), part.stat()
    with part.open("r+b") as handle:
        handle.seek(stat.st_size // 2)
        handle.write(bytes(b ^ 0xFF for b in before[stat.st_size // 2:][:64]))
    os.utime(part, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    roots = Roots(corpus.parent, tmp_path, tmp_path / "runs")
    [line] = verify(roots, [tmp_path / corpus.name])
    assert line.startswith(f"CORRUPT {part}:") and "repair: make index" in line, line
    repaired = index(place, pool, entry, 1)  # what `make index` runs
    assert repaired["damaged_parts"] == 1 and repaired["analysed"] > 0
    assert verify(roots, [tmp_path / corpus.name]) == [] and part.read_bytes() == before


def test_a_store_from_another_corpus_file_is_stale(corpus, tmp_path):
    """The store records the prefiltered.parquet it was analysed from among its inputs, as
    every artifact does (issue 30.4): one made from another is listed stale by verify, with
    the command that analyses it again, refused by search, and analysed again by index."""
    entry = get_model("bm25")
    pool = POOLS[0]
    place = Place(corpus, tmp_path, tmp_path / "runs")
    index(place, pool, entry, 1)
    store = bm25_store.store_path(tmp_path, corpus.name)
    info = read_json(store / "manifest.json")
    assert list(info["inputs"]) == ["corpora/@/prefiltered.parquet"]
    info["inputs"] = {label: "0" * 64 for label in info["inputs"]}  # an older prefiltered
    write_json(info, store / "manifest.json")
    roots = Roots(corpus.parent, tmp_path, tmp_path / "runs")
    [line] = verify(roots, [tmp_path / corpus.name])
    assert line.startswith(f"STALE {store / 'manifest.json'}: its input corpora/"
                           f"{corpus.name}/prefiltered.parquet changed since; repair: make index "
                           f"CORPUS={corpus.name} MODEL=bm25"), line
    with pytest.raises(InputError, match="another prefiltered.parquet.*repair: make index"):
        search_pool(place, pool, entry)
    again = index(place, pool, entry, 1)  # the index stage analyses it again
    assert again["reused"] == 0 and again["analysed"] == again["papers"]
    assert verify(roots, [tmp_path / corpus.name]) == []
    search_pool(place, pool, entry)


def test_queries_cut_to_the_clause_limit_are_searched_by_their_cut_text(corpus, tmp_path):
    """A query with more unique terms than Lucene's clause limit is searched by its cut text,
    not by the paper's stored terms (here the limit is lowered to the median query's number of
    words, so that about half are cut)."""
    queries, candidates, _ = load_pool(corpus, POOLS[0])
    texts = paper_texts(corpus, queries["corpusid"]).sort("corpusid")
    words = sorted(len(set(re.findall(r"[a-z0-9]+", t.lower())))
                   for t in bm25_analysis.paper_text(texts))
    limit = words[len(words) // 2]
    fresh, fresh_cut = search_papers(texts, paper_texts(corpus, candidates["corpusid"]), 50,
                                     [0.9], [0.4], max_clauses=limit)
    place = Place(corpus, tmp_path, tmp_path / "runs")
    stored, stored_cut, _ = bm25_store.search_grid(place, POOLS[0], texts, True,
                                                   candidates["corpusid"], 50, [0.9], [0.4],
                                                   max_clauses=limit)
    assert 0 < len(stored_cut) < texts.height and stored_cut == fresh_cut
    assert fresh[(0.9, 0.4)].equals(stored[(0.9, 0.4)])
    whole, _, _ = bm25_store.search_grid(place, POOLS[0], texts, True, candidates["corpusid"],
                                         50, [0.9], [0.4])
    assert not whole[(0.9, 0.4)].equals(stored[(0.9, 0.4)])  # the cut did change the lists
