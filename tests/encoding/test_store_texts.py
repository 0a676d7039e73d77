"""Issue 39.4: a store serves a vector only for the exact text it embedded.

`make demo DEMO_PAPERS=3k`, then the corpus re-synthesised in place at another size, kept the
minilm store, and the next eval took vectors from it for papers whose title and abstract had
changed. Each row now keeps its text's digest; `embed` removes (and embeds again) the rows of
papers whose text changed, and a search refuses a store not checked against the current texts.
"""

from __future__ import annotations

import gzip
import json
import shutil

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

import pipeline
from pipeline.core.checksums import fingerprint
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.encoding.coverage import pool_ids
from pipeline.encoding.embed import embed
from pipeline.encoding.encoders import Encoder
from pipeline.encoding.store import DIGEST, load_vectors, stored_ids
from pipeline.encoding.store_texts import check_current
from pipeline.layout import MANIFEST, store_dir
from pipeline.models import REGISTRY, ModelEntry


@pytest.fixture()
def tiny_entry(tiny_bert):
    entry = ModelEntry("tiny-bert-texts", "dense", str(tiny_bert), "cls", "l2", max_length=64)
    REGISTRY[entry.name] = entry
    yield entry
    del REGISTRY[entry.name]


def serves_only_current_texts(data: pipeline.Data, entry: ModelEntry, pool: str) -> int:
    """Every vector the store serves for the pool's papers is the encoding of that paper's
    current text (encoded here, afresh); returns how many were checked."""
    place = data.place("c")
    store = store_dir(data.indexes, "c", entry.name)
    check_current(place, store, entry)
    ids = pool_ids(place.corpus_dir, pool)
    papers = pl.read_parquet(place.corpus_dir / "prefiltered.parquet").filter(
        pl.col("corpusid").is_in(ids.tolist())).sort("corpusid")
    encoder = Encoder(entry, device="cpu")
    direct, _ = encoder.encode([encoder.format(t, a) for t, a in
                                papers.select("title", "abstract").iter_rows()], progress=False)
    served = load_vectors(store, papers["corpusid"].to_numpy())
    np.testing.assert_allclose(served, direct, rtol=1e-4, atol=1e-5)
    return len(ids)


def test_a_store_never_serves_a_vector_of_another_text(tiny_entry, tmp_path):
    data = pipeline.Data(tmp_path / "data")
    pipeline.build_corpus(data, "c", synthetic=1500, shards=1, seed=0)
    pool = pipeline.build_pool(data, "c", size=300, queries=5)
    place = data.place("c")
    store = store_dir(data.indexes, "c", tiny_entry.name)
    assert embed(place, tiny_entry, [pool], device="cpu")["changed_texts"] == 0
    serves_only_current_texts(data, tiny_entry, pool)

    # 1. the synthetic corpus made again in place with other settings (build_corpus, the API)
    before = dict(zip(*(pl.read_parquet(place.corpus_dir / "prefiltered.parquet")
                        .select("corpusid", "title")).get_columns(), strict=True))
    pipeline.build_corpus(data, "c", synthetic=1600, shards=1, seed=0)
    with pytest.raises(InputError, match="not checked against the current") as refused:
        check_current(place, store, tiny_entry)  # what a search does before it reads a vector
    assert refused.value.repair.target == "embed"
    pool = pipeline.build_pool(data, "c", size=300, queries=5)
    now = pl.read_parquet(place.corpus_dir / "prefiltered.parquet").select("corpusid", "title")
    changed = {i for i, t in now.iter_rows() if i in before and before[i] != t}
    stored_before = set(stored_ids(store).tolist())
    assert changed & stored_before, "the test needs papers stored under a text now changed"
    info = embed(place, tiny_entry, [pool], device="cpu")
    assert info["changed_texts"] == len(changed & stored_before)
    serves_only_current_texts(data, tiny_entry, pool)

    # 2. the raw shards changed (one paper's title, as a new release would have it), ingested
    # again: exactly that paper embedded again
    raw = place.corpus_dir / "s2orc"
    (raw / MANIFEST).unlink()  # a download now, not shards the generator vouches for
    shard = raw / "metadata" / "metadata_0.jsonl.gz"
    target = int(np.intersect1d(pool_ids(place.corpus_dir, pool), stored_ids(store))[3])
    lines = gzip.decompress(shard.read_bytes()).decode().splitlines()
    at = next(i for i, line in enumerate(lines) if int(json.loads(line)["paper_id"]) == target)
    paper = json.loads(lines[at])
    lines[at] = json.dumps({**paper, "title": f"{paper['title']} revised"})
    shard.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    pipeline.build_corpus(data, "c")
    pool = pipeline.build_pool(data, "c", size=300, queries=5)
    info = embed(place, tiny_entry, [pool], device="cpu")
    assert info["changed_texts"] == 1 and info["embedded"] >= 1
    serves_only_current_texts(data, tiny_entry, pool)
    assert embed(place, tiny_entry, [pool], device="cpu")["embedded"] == 0  # current now

    # 3. a store from before text digests: refused by search, its rows all embedded again
    for part in read_json(store / MANIFEST)["parts"]:
        path = store / part["file"]
        table = ipc.open_file(pa.memory_map(str(path))).read_all().drop_columns([DIGEST])
        with ipc.new_file(str(path.with_suffix(".tmp")), table.schema) as writer:
            writer.write_table(table)
        shutil.move(path.with_suffix(".tmp"), path)
    old = read_json(store / MANIFEST)
    for part in old["parts"]:
        part.update(fingerprint(store / part["file"]))
    del old["inputs"]
    old.pop("self_sha256", None)
    write_json(old, store / MANIFEST)
    with pytest.raises(InputError, match="before stores kept text digests"):
        check_current(place, store, tiny_entry)
    rows = len(stored_ids(store))
    info = embed(place, tiny_entry, [pool], device="cpu")
    assert info["rows_without_digest"] == rows and info["embedded"] == len(pool_ids(
        place.corpus_dir, pool))
    serves_only_current_texts(data, tiny_entry, pool)


def test_a_store_made_with_other_settings_is_refused_by_search_and_embed(tiny_entry, tmp_path):
    """A complete store whose recorded settings differ from what this version records for the
    entry (an older input format, or a multi-vector store split by an older splitter) is never
    read by a search, and embed says so instead of "all papers already stored"."""
    data = pipeline.Data(tmp_path / "data")
    pipeline.build_corpus(data, "c", synthetic=1500, shards=1, seed=0)
    pool = pipeline.build_pool(data, "c", size=300, queries=5)
    place = data.place("c")
    store = store_dir(data.indexes, "c", tiny_entry.name)
    embed(place, tiny_entry, [pool], device="cpu")
    check_current(place, store, tiny_entry)
    made = read_json(store / MANIFEST)
    made.pop("self_sha256", None)
    made["config"]["text_format"] = "{title} {abstract} (an older version's input)"
    write_json(made, store / MANIFEST)
    for step in (lambda: check_current(place, store, tiny_entry),
                 lambda: embed(place, tiny_entry, [pool], device="cpu")):
        with pytest.raises(InputError, match=r"other settings \(text_format differ"):
            step()


def test_a_multi_vector_store_records_the_splitter_a_search_checks(tmp_path):
    """The splitter and pooling a multi-vector store records are what check_settings expects
    of this version: a store split by regex-v2 (lone-dot sentences) is refused."""
    from pipeline.encoding.multivector import SPLITTER, SentenceEncoder
    from pipeline.encoding.store_texts import check_settings
    from pipeline.models import get_model

    entry = get_model("aspire-cs")
    config = SentenceEncoder.config_for(entry, [])["multi_vector"]
    assert config["splitter"] == SPLITTER and "last layer" in config["pooling"]
    assert SentenceEncoder.config_for(entry, ["abstract_sentences"])["multi_vector"][
        "splitter"] != SPLITTER
    data = pipeline.Data(tmp_path / "data")
    pipeline.build_corpus(data, "c", synthetic=300, shards=1, seed=0)
    place = data.place("c")
    store = store_dir(data.indexes, "c", entry.name)
    store.mkdir(parents=True)
    from pipeline.encoding.store_texts import text_format

    config = {"model": entry.describe(), "text_format": text_format(entry),
              "multi_vector": {**config, "splitter": "regex-v2"}}
    write_json({"manifest_version": 1, "config": config, "parts": []}, store / MANIFEST)
    with pytest.raises(InputError, match=r"other settings \(multi_vector differ"):
        check_settings(place, store, entry)
    config["multi_vector"]["splitter"] = SPLITTER
    write_json({"manifest_version": 1, "config": config, "parts": []}, store / MANIFEST)
    check_settings(place, store, entry)
