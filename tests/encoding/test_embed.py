"""The embedding store: round trip, embed-once across pools, shards, config guard."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from pipeline.core.errors import InputError
from pipeline.encoding.coverage import pool_ids
from pipeline.encoding.embed import embed
from pipeline.encoding.encoders import Encoder
from pipeline.encoding.store import distinct, load_vectors, not_stored, stored_ids
from pipeline.layout import Place, pool_names, store_dir
from pipeline.models import REGISTRY, ModelEntry
from tests.conftest import POOL_SIZES, pool_of

SMALL_POOL, LARGE_POOL = (pool_of(s) for s in POOL_SIZES)


@pytest.fixture()
def tiny_entry(tiny_bert):
    entry = ModelEntry("tiny-bert", "dense", str(tiny_bert), "cls", "l2", max_length=128)
    REGISTRY[entry.name] = entry
    yield entry
    del REGISTRY[entry.name]


@pytest.mark.slow
def test_store_round_trip_and_embed_once(corpus_dir, tmp_path, tiny_entry):
    place = Place(corpus_dir, tmp_path, tmp_path / "runs")
    first = embed(place, tiny_entry, [SMALL_POOL], batch_size=64, device="cpu")
    small_ids = pool_ids(corpus_dir, SMALL_POOL)
    assert first["embedded"] == len(small_ids)
    assert first["covered_pools"] == [SMALL_POOL]
    store = store_dir(tmp_path, corpus_dir.name, tiny_entry.name)
    assert np.array_equal(stored_ids(store), small_ids)
    # the larger pool embeds only the papers the small one did not have
    second = embed(place, tiny_entry, [LARGE_POOL], batch_size=64,
                   device="cpu")
    large_ids = pool_ids(corpus_dir, LARGE_POOL)
    assert second["embedded"] == len(np.setdiff1d(large_ids, small_ids))
    assert embed(place, tiny_entry, [LARGE_POOL])["embedded"] == 0
    # what a store lacks, found part by part (two parts here), asked in any order, repeated
    outside = np.array([10**12 + 7, -3])
    asked = np.concatenate([large_ids[::-1], outside, large_ids[:5]])
    assert len(list(store.glob("part-*.arrow"))) == 2
    assert np.array_equal(not_stored(store, asked), np.sort(outside))
    assert np.array_equal(not_stored(store, asked), np.setdiff1d(asked, stored_ids(store)))
    assert len(not_stored(store, np.zeros(0, dtype=np.int64))) == 0
    assert np.array_equal(distinct(asked), np.unique(asked))
    assert list(distinct(np.array(["b", "a", "b"], dtype=object))) == ["a", "b"]
    # each part: int64 ids sorted, fixed-size float vectors
    for part in sorted(store.glob("part-*.arrow")):
        table = ipc.open_file(pa.memory_map(str(part))).read_all()
        assert table.schema.field("corpusid").type == pa.int64()
        assert pa.types.is_fixed_size_list(table.schema.field("vector").type)
        ids = table.column("corpusid").to_numpy()
        assert np.all(np.diff(ids) > 0)
    # the stored vectors are what the encoder computes, in the order asked for
    import polars as pl

    encoder = Encoder(tiny_entry, device="cpu")  # as the store was made: on the CPU
    pick = large_ids[[5, 0, 17]]
    papers = pl.read_parquet(corpus_dir / "prefiltered.parquet").filter(
        pl.col("corpusid").is_in(pick.tolist()))
    by_id = {r["corpusid"]: encoder.format(r["title"], r["abstract"])
             for r in papers.iter_rows(named=True)}
    direct, _ = encoder.encode([by_id[i] for i in pick], progress=False)
    np.testing.assert_allclose(load_vectors(store, pick), direct, rtol=1e-4, atol=1e-5)
    with pytest.raises(InputError, match="have no vector"):
        load_vectors(store, np.array([-1]))


@pytest.mark.slow
def test_shards_split_the_work_and_cover_together(corpus_dir, tmp_path, tiny_entry):
    place = Place(corpus_dir, tmp_path, tmp_path / "runs")
    a = embed(place, tiny_entry, [SMALL_POOL], shard=0, num_shards=2)
    assert a["covered_pools"] == []
    b = embed(place, tiny_entry, [SMALL_POOL], shard=1, num_shards=2)
    assert b["covered_pools"] == [SMALL_POOL]
    assert a["embedded"] + b["embedded"] == len(pool_ids(corpus_dir, SMALL_POOL))
    store = store_dir(tmp_path, corpus_dir.name, tiny_entry.name)
    assert (store / "pools" / f"{SMALL_POOL}.json").exists()
    with pytest.raises(InputError, match="--shard 2"):
        embed(place, tiny_entry, [SMALL_POOL], shard=2, num_shards=2)


@pytest.mark.slow
def test_other_settings_are_refused(corpus_dir, tmp_path, tiny_entry):
    place = Place(corpus_dir, tmp_path, tmp_path / "runs")
    embed(place, tiny_entry, [SMALL_POOL])
    with pytest.raises(InputError, match="other settings"):
        embed(place, tiny_entry, [LARGE_POOL], dtype="float16")


def test_embeds_own_argument_errors_name_its_keywords_before_anything_is_read(tmp_path):
    entry = ModelEntry("tiny-bert", "dense", "unused", "cls", "l2", max_length=128)
    place = Place(tmp_path / "corpora" / "c", tmp_path / "indexes", tmp_path / "runs")
    for arguments, line in [({"dtype": "float64"}, "dtype='float64': use 'float32' or 'float16'"),
                            ({"part_size": 0, "batch_size": -1},
                             "part_size=0, batch_size=-1: give a whole number >= 1"),
                            ({"token_budget": 0}, "token_budget=0: give a whole number >= 1")]:
        with pytest.raises(InputError, match=re.escape(line)):
            embed(place, entry, ["p"], **arguments)
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_float16_store(corpus_dir, tmp_path, tiny_entry):
    embed(Place(corpus_dir, tmp_path, tmp_path / "runs"), tiny_entry, [SMALL_POOL], dtype="float16")
    store = store_dir(tmp_path, corpus_dir.name, tiny_entry.name)
    part = next(store.glob("part-*.arrow"))
    table = ipc.open_file(pa.memory_map(str(part))).read_all()
    assert table.schema.field("vector").type.value_type == pa.float16()
    ids = pool_ids(corpus_dir, SMALL_POOL)
    wide = load_vectors(store, ids[:3])
    assert wide.dtype == np.float32
    # dtype=None keeps float16 (half the memory); ids may repeat and come in any order
    pick = ids[[2, 0, 2, 1]]
    stored = load_vectors(store, pick, dtype=None)
    assert stored.dtype == np.float16
    assert np.array_equal(stored.astype(np.float32), wide[[2, 0, 2, 1]])


@pytest.mark.slow
def test_minilm_loads_offline_from_its_package():
    from pipeline.models import get_model

    encoder = Encoder(get_model("minilm"), device="cpu")
    texts = [encoder.format("Myocardial infarction in elderly patients",
                            "Cardiac troponin and coronary stenosis predict heart failure."),
             encoder.format("Heart attack outcomes in older adults",
                            "Coronary artery disease and cardiac biomarkers in the elderly."),
             encoder.format("Sedimentary basins of the Jurassic",
                            "Stratigraphy and limestone facies of marine sediments.")]
    vectors, tokens = encoder.encode(texts, progress=False)
    assert vectors.shape == (3, 384) and tokens > 30
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2


def test_missing_model_folder_is_a_clear_error():
    entry = ModelEntry("tiny-bert", "dense", "unused", "cls", "l2", max_length=128)
    with pytest.raises(InputError, match="is not a folder"):
        Encoder(entry, model_path="/nonexistent/model")


def test_unreachable_hub_model_is_a_clear_error(monkeypatch):
    from pipeline.models import get_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError, match="cannot load MODEL scincl from malteos/scincl"):
        Encoder(get_model("scincl"))


def test_unreachable_hub_is_detected_up_front(monkeypatch, tmp_path):
    """No hub and not cached: one line naming the id, MODEL_PATH and HF_HOME (no retries)."""
    from pipeline.models import get_model

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(InputError, match=r"malteos/scincl is not in the hub cache .* cannot be "
                                         r"reached.*MODEL_PATH=<folder>.*HF_HOME="):
        Encoder(get_model("scincl"))


def test_dense_encoder_refuses_multi_vector_models_clearly():
    """ASPIRE is embedded per sentence by multivector.SentenceEncoder
    (tests/encoding/test_multivector.py); the single-vector Encoder says so before loading
    anything."""
    from pipeline.models import get_model

    with pytest.raises(InputError, match="multi-vector model: Encoder embeds dense models only "
                       r"\(multi-vector: pipeline.encoding.multivector.SentenceEncoder"):
        Encoder(get_model("aspire-cs"))


@pytest.mark.slow
def test_parts_are_written_as_they_finish_so_a_killed_job_resumes(corpus_dir, tmp_path,
                                                                  tiny_entry, monkeypatch):
    calls = {"n": 0}
    real_encode = Encoder.encode_ids

    def dies_on_second_part(self, ids, *args):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt("killed")
        return real_encode(self, ids, *args)

    monkeypatch.setattr(Encoder, "encode_ids", dies_on_second_part)
    place = Place(corpus_dir, tmp_path, tmp_path / "runs")
    with pytest.raises(KeyboardInterrupt):
        embed(place, tiny_entry, [SMALL_POOL], part_size=300)
    store = store_dir(tmp_path, corpus_dir.name, tiny_entry.name)
    assert len(stored_ids(store)) == 300
    assert not list(store.glob(".*.tmp"))  # nothing half-written
    resumed = embed(place, tiny_entry, [SMALL_POOL], part_size=300)
    total = len(pool_ids(corpus_dir, SMALL_POOL))
    assert resumed["embedded"] == total - 300
    assert len(list(store.glob("part-*.arrow"))) == -(-total // 300)


def test_checkpoints_every_few_thousand_papers():
    """Defect 12: parts of 100k papers meant a kill lost up to 100k papers of work."""
    import inspect

    from pipeline.cli.main import build_parser

    assert inspect.signature(embed).parameters["part_size"].default <= 5000
    args = build_parser().parse_args(["embed"])
    assert args.part_size is None  # each store's own default: embed's above


@pytest.mark.slow
def test_two_processes_on_one_store_do_not_corrupt_it(corpus_dir, tmp_path, tiny_bert):
    """Two `make embed` for one model at once: both finish, the store is whole and verifies."""
    import subprocess
    import sys

    from pipeline.core.inputs import Roots
    from pipeline.verify import verify

    corpora = tmp_path / "corpora"
    corpora.mkdir()
    (corpora / corpus_dir.name).symlink_to(corpus_dir)
    cmd = [sys.executable, "-m", "pipeline", "--corpora-root", str(corpora), "--index-root",
           str(tmp_path / "indexes"), "embed", "--corpus", corpus_dir.name, "--model", "scibert",
           "--model-path", str(tiny_bert), "--pool", SMALL_POOL, "--part-size", "150"]
    logs = [tmp_path / f"embed-{n}.log" for n in range(2)]  # files: a pipe nobody reads fills
    procs = []
    try:
        for log in logs:
            with log.open("w") as out:
                procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT))
        codes = [p.wait(timeout=600) for p in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert codes == [0, 0], [log.read_text()[-2000:] for log in logs]
    store = store_dir(tmp_path / "indexes", corpus_dir.name, "scibert")
    assert np.array_equal(stored_ids(store), pool_ids(corpus_dir, SMALL_POOL))
    assert verify(Roots(corpora, tmp_path / "indexes", tmp_path / "runs"),
                  [tmp_path / "indexes"]) == []


@pytest.fixture(scope="module")
def shared_data(corpus_dir, tiny_bert, tmp_path_factory):
    """One DATA: the small corpus's SMALL_POOL embedded by tiny-bert, and the pool exported
    as a BEIR folder and imported back as corpus `again` (string ids), one document's title
    changed on the way. Returns (index root, the small corpus's place, again's, the changed
    document's id, the entry)."""
    import json

    from pipeline.external.beir import import_beir
    from pipeline.external.export import export_beir

    root = tmp_path_factory.mktemp("shared")
    entry = ModelEntry("tiny-bert", "dense", str(tiny_bert), "cls", "l2", max_length=128)
    small = Place(corpus_dir, root / "indexes", root / "runs")
    embed(small, entry, [SMALL_POOL], device="cpu")
    out = root / "beir"
    export_beir(small, SMALL_POOL, out)
    lines = (out / "corpus.jsonl").read_text().splitlines()
    changed = json.loads(lines[3])
    lines[3] = json.dumps({**changed, "title": "Revised: " + changed["title"]})
    (out / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    import_beir(out, root / "corpora" / "again")
    again = Place(root / "corpora" / "again", root / "indexes", root / "runs")
    return root / "indexes", small, again, changed["_id"], entry


@pytest.mark.slow
def test_a_text_is_embedded_once_per_data(shared_data, caplog):
    """Issue 57: a pool exported and imported back embedded every paper again. Every paper
    whose text another store of the same model holds takes its vector, whatever its id there
    (matched by text digest alone: copied bit for bit); a paper whose text differs is
    embedded; the stage says both counts, also when both are 0."""
    indexes, small, again, changed, entry = shared_data
    with caplog.at_level("INFO"):
        info = embed(again, entry, device="cpu")
    assert (info["embedded"], info.get("reused")) == (1, info["needed"] - 1), info
    assert f"[embed] tiny-bert on again: embedded=1 reused={info['needed'] - 1} " in caplog.text
    ids = pool_ids(again.corpus_dir, pool_names(again.corpus_dir)[0])
    kept = ids[ids != changed]
    mine = load_vectors(store_dir(indexes, "again", entry.name), kept)
    theirs = load_vectors(store_dir(indexes, "small", entry.name), kept.astype(np.int64))
    assert np.array_equal(mine, theirs)
    # the revised paper's vector is its new text's, not the one the small corpus's store holds
    revised = load_vectors(store_dir(indexes, "again", entry.name), np.array([changed], object))
    original = load_vectors(store_dir(indexes, "small", entry.name), np.array([int(changed)]))
    paper = pl.read_parquet(again.corpus_dir / "prefiltered.parquet").filter(
        pl.col("corpusid") == changed)
    encoder = Encoder(entry, device="cpu")
    direct, _ = encoder.encode([encoder.format(paper["title"][0], paper["abstract"][0])],
                               progress=False)
    np.testing.assert_allclose(revised, direct, rtol=1e-4, atol=1e-6)
    assert not np.allclose(original, direct, rtol=1e-4, atol=1e-6)
    caplog.clear()
    with caplog.at_level("INFO"):
        assert embed(again, entry, device="cpu")["reused"] == 0
    assert "[embed] tiny-bert on again: embedded=0 reused=0 " in caplog.text


@pytest.mark.slow
def test_a_store_of_another_identity_lends_nothing(shared_data):
    """Vectors are reused only from a store whose config equals this embed's in everything
    that changes a vector: another dtype or max_length embeds every paper; another name for
    the same model (NOT_VECTOR) reuses every one."""
    from dataclasses import replace

    _, small, _, _, entry = shared_data
    needed = len(pool_ids(small.corpus_dir, SMALL_POOL))  # all in tiny-bert's store
    renamed = embed(small, replace(entry, name="tiny-bert-too"), [SMALL_POOL], device="cpu")
    assert (renamed["embedded"], renamed.get("reused")) == (0, renamed["needed"])
    for name, changes, dtype in (("tiny-bert-half", {}, "float16"),
                                 ("tiny-bert-64", {"max_length": 64}, "float32")):
        other = replace(entry, name=name, **changes)
        info = embed(small, other, [SMALL_POOL], dtype=dtype, device="cpu")
        assert (info["embedded"], info.get("reused")) == (needed, 0), (name, info)


@pytest.mark.slow
def test_make_eval_on_an_exported_pool_imported_back_embeds_nothing(corpus_dir, tiny_bert,
                                                                    tmp_path):
    """Issue 57, through make: `make eval` on a corpus, then `make export-beir` and `make
    import-beir` of its pool and `make eval` on the imported corpus: the second embeds 0
    papers and reuses every one, and each says so in the line ending its embedding."""
    from pipeline.pools.build import PoolSpec, build_pool
    from tests.conftest import POOL_SEED, copy_corpus, make_ok

    root = tmp_path / "data"
    corpus = copy_corpus(corpus_dir, root / "corpora" / "small")
    # a pool of 200 candidates and 5 queries (a quarter of the session's smaller pool to
    # embed), still a whole pool embedded, exported and imported back
    spec = PoolSpec(size=200, queries=5, seed=POOL_SEED)
    build_pool(corpus, spec)
    (tmp_path / "installed").touch()
    model = ("MODEL=hf:test/tiny-bert", f"MODEL_PATH={tiny_bert}", "POOLING=cls")
    said = make_ok(root, tmp_path / "installed", "eval", *model)
    needed = len(pool_ids(corpus, spec.name))
    assert re.search(rf"\[embed\] \S+ on small: embedded={needed} reused=0 ", said), said
    out = tmp_path / "pool-beir"
    make_ok(root, tmp_path / "installed", "export-beir", f"POOL={spec.name}", f"OUT={out}")
    make_ok(root, tmp_path / "installed", "import-beir", f"SRC={out}", "CORPUS=again")
    said = make_ok(root, tmp_path / "installed", "eval", "CORPUS=again", *model)
    (pool,) = pool_names(root / "corpora" / "again")
    documents = len(pool_ids(root / "corpora" / "again", pool))
    assert re.search(rf"\[embed\] \S+ on again: embedded=0 reused={documents} ", said), said
    assert "[eval] done" in said or "evaluations" in said, said[-2000:]


@pytest.mark.slow
def test_a_damaged_lender_lends_nothing_and_says_so(corpus_dir, tmp_path, tiny_entry, caplog):
    """Another store whose part is damaged is no reason to refuse this one: it lends nothing,
    in one line naming it, and the papers are embedded here (never a damaged vector)."""
    from dataclasses import replace

    place = Place(corpus_dir, tmp_path, tmp_path / "runs")
    embed(place, tiny_entry, [SMALL_POOL], device="cpu")
    part = next(store_dir(tmp_path, corpus_dir.name, tiny_entry.name).glob("part-*.arrow"))
    data = bytearray(part.read_bytes())
    data[-100] ^= 0xFF
    part.write_bytes(bytes(data))
    with caplog.at_level("WARNING"):
        info = embed(place, replace(tiny_entry, name="tiny-bert-too"), [SMALL_POOL],
                     device="cpu")
    assert (info["embedded"], info.get("reused")) == (info["needed"], 0), info
    assert f"{part.parent} lends no vectors: " in caplog.text
