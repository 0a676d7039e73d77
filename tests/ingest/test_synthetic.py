"""The generator writes S2ORC 2020 metadata exactly, with realistic structure (docs/ingest.md)."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from pipeline.core.errors import InputError
from pipeline.fields import MAG_FIELDS
from pipeline.ingest.synthetic import SyntheticConfig, generate
from tests.conftest import SMALL

REQUIRED = {
    "paper_id": str, "title": str, "authors": list, "abstract": (str, type(None)),
    "year": (int, type(None)), "arxiv_id": (str, type(None)), "acl_id": (str, type(None)),
    "pmc_id": (str, type(None)), "pubmed_id": (str, type(None)), "mag_id": (str, type(None)),
    "doi": (str, type(None)), "venue": (str, type(None)), "journal": (str, type(None)),
    "mag_field_of_study": (list, type(None)), "outbound_citations": list,
    "inbound_citations": list, "has_outbound_citations": bool, "has_inbound_citations": bool,
    "has_pdf_parse": bool, "s2_url": str,
}
OPTIONAL = {"has_pdf_parsed_abstract", "has_pdf_parsed_body_text", "has_pdf_parsed_bib_entries",
            "has_pdf_parsed_ref_entries", "has_pdf_body_text"}


def read_rows(raw: Path) -> list[dict]:
    rows = []
    for shard in sorted((raw / "metadata").glob("metadata_*.jsonl.gz")):
        with gzip.open(shard, "rt") as handle:
            rows += [json.loads(line) for line in handle]
    return rows


@pytest.fixture(scope="module")
def rows(raw_corpus) -> list[dict]:
    return read_rows(raw_corpus)


def test_layout_and_row_count(raw_corpus, rows):
    shards = sorted(p.name for p in (raw_corpus / "metadata").iterdir()
                    if not p.name.startswith("."))  # .checksums.json: the shards' sha256
    assert shards == [f"metadata_{k}.jsonl.gz" for k in range(SMALL.n_shards)]
    assert len(rows) == SMALL.n_papers
    assert len({r["paper_id"] for r in rows}) == SMALL.n_papers


def test_fields_names_types_and_quirks(rows):
    for row in rows:
        assert REQUIRED.keys() <= row.keys() <= REQUIRED.keys() | OPTIONAL
        for key, kind in REQUIRED.items():
            assert isinstance(row[key], kind), (key, row[key])
        assert row["paper_id"].isdigit()
        assert row["s2_url"] == f"https://api.semanticscholar.org/CorpusID:{row['paper_id']}"
        assert row["has_outbound_citations"] == bool(row["outbound_citations"])
        assert row["has_inbound_citations"] == bool(row["inbound_citations"])
        for author in row["authors"]:
            assert set(author) == {"first", "middle", "last", "suffix"}
            assert isinstance(author["middle"], list)
    # missing field lists appear both as null and as [] (docs/ingest.md)
    kinds = Counter(type(r["mag_field_of_study"]).__name__ + str(bool(r["mag_field_of_study"]))
                    for r in rows)
    assert kinds["NoneTypeFalse"] > 0 and kinds["listFalse"] > 0


def test_inbound_lists_are_the_transpose_of_outbound(rows):
    ids = {r["paper_id"] for r in rows}
    outbound = {(r["paper_id"], c) for r in rows for c in r["outbound_citations"] if c in ids}
    inbound = {(c, r["paper_id"]) for r in rows for c in r["inbound_citations"]}
    assert outbound == inbound
    dangling = sum(c not in ids for r in rows for c in r["outbound_citations"])
    assert dangling > 0  # S2ORC cites ids absent from the corpus


def test_citations_point_to_older_papers_and_are_heavy_tailed(rows):
    year = {r["paper_id"]: r["year"] for r in rows}
    pairs = [(year[r["paper_id"]], year[c]) for r in rows for c in r["outbound_citations"]
             if c in year and year[c] is not None and r["year"] is not None]
    assert pairs and all(cited <= citing for citing, cited in pairs)
    inbound = np.array([len(r["inbound_citations"]) for r in rows])
    assert inbound.max() > 10 * max(np.median(inbound), 1)
    recent = [len(r["outbound_citations"]) for r in rows if r["year"] in (2018, 2019)]
    assert 20 <= np.mean(recent) <= 40


def test_fields_are_skewed_and_multi_labelled(rows):
    counts = Counter(f for r in rows for f in (r["mag_field_of_study"] or []))
    assert set(counts) == set(MAG_FIELDS)
    assert counts.most_common(1)[0][0] == "Medicine"
    n_fields = Counter(len(r["mag_field_of_study"] or []) for r in rows)
    assert {0, 1, 2, 3} <= set(n_fields)
    assert n_fields[1] > 0.8 * len(rows)


def test_abstracts_and_years_look_real(rows):
    abstracts = [r["abstract"] for r in rows]
    missing = sum(a is None for a in abstracts) / len(rows)
    assert 0.4 < missing < 0.6
    present = [a for a in abstracts if a is not None]
    assert any(len(a) < 30 for a in present)
    words = np.array([len(a.split()) for a in present if len(a) >= 30])
    assert np.mean((words >= 100) & (words <= 300)) > 0.6
    years = Counter(r["year"] for r in rows)
    assert years[2019] > years[2000] > years[1980] > 0
    assert years[None] > 0 and sum(r["title"] == "" for r in rows) > 0


def test_same_seed_same_bytes_whatever_the_workers_and_shards(tmp_path):
    cfg = SyntheticConfig(n_papers=600, n_shards=2, seed=3, block_size=250)
    generate(tmp_path / "a", cfg)
    generate(tmp_path / "b", cfg, workers=2)
    generate(tmp_path / "c", replace(cfg, n_shards=5))
    for k in range(2):
        name = f"metadata/metadata_{k}.jsonl.gz"
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    by_id = {r["paper_id"]: r for r in read_rows(tmp_path / "a")}
    assert by_id == {r["paper_id"]: r for r in read_rows(tmp_path / "c")}


def test_too_small_corpus_is_refused(tmp_path):
    with pytest.raises(InputError, match="at least 100 papers"):
        generate(tmp_path, SyntheticConfig(n_papers=10))


def test_the_generator_never_starts_more_workers_than_blocks(tmp_path, monkeypatch):
    """Issue 46: `build_corpus(synthetic=2000, workers=10**5)` forked thousands of processes
    for a handful of blocks. The pool is min(workers, blocks), none for one block, and the
    bytes are those of one worker."""
    import pipeline.ingest.synthetic as synthetic

    sizes: list[int] = []
    real_pool = synthetic.worker_pool

    def recorded_pool(workers: int, start: str = "spawn"):
        sizes.append(workers)
        return real_pool(workers, start)

    monkeypatch.setattr(synthetic, "worker_pool", recorded_pool)
    cfg = SyntheticConfig(n_papers=300, n_shards=2, seed=3, block_size=150)  # two blocks
    generate(tmp_path / "many", cfg, workers=500)
    assert sizes == [2]
    generate(tmp_path / "one", cfg, workers=1)
    one_block = replace(cfg, block_size=300)
    generate(tmp_path / "single", one_block, workers=500)
    assert sizes == [2]  # one block: rendered here, no pool
    for name in ("metadata_0.jsonl.gz", "metadata_1.jsonl.gz"):
        assert ((tmp_path / "many" / "metadata" / name).read_bytes()
                == (tmp_path / "one" / "metadata" / name).read_bytes())


@pytest.mark.parametrize("cfg, message", [
    (SyntheticConfig(n_papers=200, n_shards=10**6), "1 to 256 shards"),  # Too many open files
    (SyntheticConfig(n_papers=200, block_size=0), "block_size=0: give 1 or more"),
])
def test_a_config_out_of_bounds_is_refused_before_anything_is_written(cfg, message, tmp_path):
    """Issue 46: a SyntheticConfig given whole (the API's synthetic=) skips the checks of
    shards=: 10**6 shards was a traceback (too many open files), block_size=0 a division by
    zero."""
    with pytest.raises(InputError, match=message):
        generate(tmp_path / "raw", cfg)
    assert not (tmp_path / "raw").exists()


def test_the_settings_chosen_given_recorded_or_kept(tmp_path, caplog):
    """synth and make corpus: a setting given wins, the others as recorded; none given keeps
    the corpus as it is (one log line naming the corpus and how to remake it); --repair takes
    the recorded settings, and is refused, naming what to give, when they are lost."""
    from pipeline.core.files import write_json
    from pipeline.core.manifests import manifest
    from pipeline.ingest.synthetic import chosen_config

    out_dir = tmp_path / "corpora" / "mine" / "s2orc"
    with pytest.raises(InputError, match="settings are lost.*DEMO_PAPERS and DEMO_SEED"):
        chosen_config(out_dir, n_papers=500, repair=True)
    assert chosen_config(out_dir) == SyntheticConfig()  # a first corpus: the defaults
    made = SyntheticConfig(n_papers=300, n_shards=2, seed=5)
    out_dir.mkdir(parents=True)
    write_json(manifest("synthetic", asdict(made)), out_dir / "manifest.json")
    with caplog.at_level("INFO"):
        assert chosen_config(out_dir, n_papers=400) == replace(made, n_papers=400)
        assert "as it is" not in caplog.text
        assert chosen_config(out_dir) == made
    kept = [r.getMessage() for r in caplog.records if "as it is" in r.getMessage()]
    assert len(kept) == 1 and kept[0].startswith("synth: mine: ") and "300 papers" in kept[0]
    assert chosen_config(out_dir, n_papers=400, seed=1, repair=True) == made
    (out_dir / "manifest.json").write_text("{")
    with pytest.raises(InputError, match="manifest.json.*settings are lost"):
        chosen_config(out_dir, repair=True)
