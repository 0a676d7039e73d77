"""EXCLUDE and TRAINING_SETS: lists in their published formats, pools named by the list's ids,
the manifest's record, a changed list refused, the converter of SPECTER's SHA lists, and the
report's leakage table checked against a count made here."""

from __future__ import annotations

import gzip
import hashlib
import json
import shlex

import polars as pl
import pytest

from pipeline.core.errors import InputError
from pipeline.core.inputs import Roots
from pipeline.ingest.training_ids import convert
from pipeline.layout import exclusion_tag, parse_pool_name
from pipeline.pools.build import PoolSpec, build_pool, load_pool, rebuild_pool, validation_pools
from pipeline.pools.exclusions import read_list
from tests.conftest import N_QUERIES, POOL_SIZES, copy_corpus, pool_of
from tests.report.test_report_names import markdown_html


@pytest.fixture(scope="module")
def fixture_queries(corpus_dir) -> list[int]:
    """Queries of the fixture's pool: papers the sampler does pick, so a list of them does
    leave eligible papers out."""
    return sorted(load_pool(corpus_dir, pool_of(POOL_SIZES[0]))[0]["corpusid"].to_list())


def test_the_formats_give_one_digest(tmp_path):
    """The same papers in SciNCL's JSON list (digit strings), as numbers, and as text with
    repeats, comments and another order: one identity."""
    ids = [31, 7, 1200, 7]
    (tmp_path / "scincl.json").write_text(json.dumps([str(i) for i in ids]))
    (tmp_path / "numbers.json").write_text(json.dumps(ids))
    (tmp_path / "ids.txt").write_text("# training papers\n1200\n\n7\n31  # a comment\n7\n")
    lists = [read_list(tmp_path / name) for name in ("scincl.json", "numbers.json", "ids.txt")]
    assert [p.format for p in lists] == ["json-list", "json-list", "corpusids"]
    assert {p.digest for p in lists} == {hashlib.sha256(b"7\n31\n1200\n").hexdigest()}
    assert lists[0].ids.tolist() == [7, 31, 1200] and lists[2].lines == 4
    assert len({p.file_sha256 for p in lists}) == 3  # the files differ, the papers do not


@pytest.mark.parametrize(("text", "message"), [
    ("", "holds no CorpusID"),
    ("12\nabc\n", "line 2: 'abc' is not a CorpusID"),
    ("a" * 40 + "\n", "SHA, not a CorpusID; convert"),
    ('{"' + "b" * 40 + '": {}}', r"by SHA\): convert it"),
    ("[1, 2,", "not valid JSON"),
    ("[1, true]", "item 2"),
    ("99999999999999999999\n", "not a CorpusID"),
])
def test_bad_lists_are_one_line(tmp_path, text, message):
    path = tmp_path / "list.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as caught:
        read_list(path)
    assert "\n" not in caught.value.message
    with pytest.raises(InputError, match="no such file"):
        read_list(tmp_path / "missing.txt")


def test_pools_are_named_by_the_list(corpus_dir, tmp_path, fixture_queries):
    """A list of eligible queries: the pool leaves them out, is named by the list's ids (the
    same in another format; another list: another pool beside it), records it, and a changed
    file is refused by the command that rebuilds the pool."""
    corpus = copy_corpus(corpus_dir, tmp_path / "corpora" / "small")
    listed = fixture_queries[:6]
    text = tmp_path / "specter.txt"
    text.write_text("".join(f"{i}\n" for i in listed))
    spec = PoolSpec(size=POOL_SIZES[0], queries=N_QUERIES, seed=1, exclude=str(text))
    built = build_pool(corpus, spec)
    papers = read_list(text)
    assert built["name"] == f"all-800-s1-x{papers.tag}-r0"
    assert parse_pool_name(built["name"]).exclusion == exclusion_tag(papers.digest)
    queries, candidates, _ = load_pool(corpus, built["name"])
    assert not set(queries["corpusid"].to_list()) & set(listed)
    assert queries.height == N_QUERIES
    assert built["counts"]["query_candidates_excluded"] == len(listed)
    assert built["exclusion"] == {"path": str(text.resolve()), "format": "corpusids",
                                  "ids": 6, "entries": 6, "ids_sha256": papers.digest,
                                  "file_sha256": papers.file_sha256}
    assert built["parameters"]["exclusion"] == papers.digest
    # the same papers as SciNCL's JSON list: the same pool, found current
    scincl = tmp_path / "scincl.json"
    scincl.write_text(json.dumps([str(i) for i in reversed(listed)]))
    again = build_pool(corpus, PoolSpec(size=POOL_SIZES[0], queries=N_QUERIES, seed=1,
                                        exclude=str(scincl)))
    assert again["name"] == built["name"]
    assert load_pool(corpus, again["name"])[0].equals(queries)
    # another list: another pool, the first one untouched
    other = tmp_path / "other.txt"
    other.write_text(f"{listed[0]}\n")
    second = build_pool(corpus, PoolSpec(size=POOL_SIZES[0], queries=N_QUERIES, seed=1,
                                         exclude=str(other)))
    assert second["name"] != built["name"]
    assert load_pool(corpus, built["name"])[0].equals(queries)
    # the list's file changed: the pool that bears its old ids' name is not rebuilt from it
    scincl.write_text(json.dumps(listed[:2]))
    with pytest.raises(InputError, match="cannot be rebuilt: its EXCLUDE list .* has other "
                       "papers") as caught:
        rebuild_pool(corpus, again["name"])
    assert "\n" not in caught.value.message
    # its validation pools are those drawn without the same list
    val = build_pool(corpus, PoolSpec(size=POOL_SIZES[0], queries=5, seed=1,
                                      exclude=str(text), split="validation"))
    assert validation_pools(corpus, built["name"]) == [val["name"]]
    assert validation_pools(corpus, second["name"]) == []
    assert not set(load_pool(corpus, val["name"])[0]["corpusid"].to_list()) & set(listed)


def test_specter_shas_become_corpus_ids(tmp_path):
    """SPECTER's data.json (both levels' keys are training papers) through shards written as
    S2AG's paper-ids dataset; a SHA S2 does not know is counted, not silently dropped."""
    shas = [hashlib.sha1(str(i).encode()).hexdigest() for i in range(5)]
    (tmp_path / "data.json").write_text(json.dumps({
        shas[0]: {shas[1]: {"count": 5}, shas[2]: {"count": 1}},
        shas[3]: {shas[1]: {"count": 5}, shas[4]: {"count": 1}}}))
    folder = tmp_path / "paper-ids"
    folder.mkdir()
    for k, part in enumerate(([0, 1], [2, 3])):
        with gzip.open(folder / f"paper-ids-{k}.jsonl.gz", "wt") as handle:
            for i in part:
                handle.write(json.dumps({"sha": shas[i], "corpusid": 100 + i,
                                         "primary": True}) + "\n")
            handle.write(json.dumps({"sha": "f" * 40, "corpusid": 999, "primary": True}) + "\n")
    counts = convert(tmp_path / "data.json", folder, tmp_path / "specter.txt")
    assert counts == {"shas": 5, "corpus_ids": 4, "shas_not_found": 1}
    assert read_list(tmp_path / "specter.txt").ids.tolist() == [100, 101, 102, 103]
    triples = tmp_path / "train_triples.csv"  # SPECTER's triples as SciNCL extracts them
    triples.write_text("query_paper_id,positive_id,negative_id\n"
                       f"{shas[0]},{shas[1]},{shas[2]}\n{shas[3]},{shas[1]},{shas[4]}\n")
    assert convert(triples, folder, tmp_path / "triples.txt") == counts
    assert (tmp_path / "triples.txt").read_bytes() == (tmp_path / "specter.txt").read_bytes()
    (tmp_path / "ids.txt").write_text("12\n13\n")
    with pytest.raises(InputError, match="needs no conversion"):
        convert(tmp_path / "ids.txt", folder, tmp_path / "out.txt")
    assert not (tmp_path / "out.txt").exists()


def test_leakage_table_counts_training_papers(corpus_dir, tmp_path, fixture_queries):
    """The report's leakage table against a count made here from the pools' files; pools of
    two lists are never reported together."""
    from pipeline.evaluation.evaluate import collect_results, eval_run
    from pipeline.layout import Place
    from pipeline.models import get_model
    from pipeline.report.build import build_report, load_results
    from pipeline.retrieval.search import search_pool

    corpus = copy_corpus(corpus_dir, tmp_path / "corpora" / "small")
    place = Place(corpus, tmp_path / "indexes", tmp_path / "runs")
    pools = [build_pool(corpus, PoolSpec(size=size, queries=N_QUERIES, seed=1))["name"]
             for size in POOL_SIZES]
    assert pools == [pool_of(size) for size in POOL_SIZES]
    for pool in pools:
        search_pool(place, pool, get_model("random"))
        eval_run(place, pool, "random")
    collect_results(corpus.parent, place.index_root, place.runs_root)
    queries, _, qrels = load_pool(corpus, pools[0])
    positives = sorted(set(qrels["doc"].to_list()))
    trained = sorted(queries["corpusid"].to_list()[::2]) + positives[:3]
    training = tmp_path / "trained.json"
    training.write_text(json.dumps(trained))
    report = build_report(place.runs_root, corpus.name, seed=1,
                          training_sets={"specter": str(training)})
    table = report.tables["leakage"].frame()
    row = table.filter(pl.col("pool") == pools[0]).row(0, named=True)
    in_queries = len(set(trained) & set(queries["corpusid"].to_list()))
    in_positives = len(set(trained) & set(positives))
    assert in_queries == (N_QUERIES + 1) // 2 and in_positives >= 3
    assert row["queries"] == str(N_QUERIES)
    assert row["specter: queries in training"] == (
        f"{in_queries} ({100 * in_queries / N_QUERIES:.1f}%)")
    assert row["specter: positives in training"] == (
        f"{in_positives} ({100 * in_positives / len(positives):.1f}%)")
    assert table["pool"].to_list() == [*pools, "all pools"]
    trained_var = shlex.quote(f"specter={training}")
    assert dict(report.provenance.about)["rebuild this page"] == (
        f"make report CORPUS={corpus.name} SEED=1 TRAINING_SETS={trained_var}")
    assert "leakage" not in build_report(place.runs_root, corpus.name, seed=1).tables
    # a label and a file name of HTML's characters reached the Markdown file raw (issue 46)
    hostile = tmp_path / "a<b&c>.json"
    hostile.write_text(json.dumps(trained))
    shown = build_report(place.runs_root, corpus.name, seed=1,
                         training_sets={"<!--<script>": str(hostile)})
    leakage = shown.tables["leakage"]
    assert leakage.header[3] == "<!--<script>: queries in training"
    assert markdown_html(shown.document) == "" and "<!--" not in shown.html
    assert r"\textless{}!--\textless{}script\textgreater{}:" in leakage.latex  # its header
    assert r"a\textless{}b\&c\textgreater{}.json" in leakage.latex  # the caption's file
    # a pool drawn without a list beside them: the report asks which pools to show
    listed = tmp_path / "listed.txt"
    listed.write_text("".join(f"{i}\n" for i in fixture_queries[:3]))
    excluded = build_pool(corpus, PoolSpec(size=POOL_SIZES[0], queries=N_QUERIES, seed=1,
                                           exclude=str(listed)))["name"]
    search_pool(place, excluded, get_model("random"))
    eval_run(place, excluded, "random")
    results = collect_results(corpus.parent, place.index_root, place.runs_root)
    tags = results.group_by("pool").agg(pl.col("exclusion").first()).sort("pool")
    assert dict(tags.iter_rows()) == {**dict.fromkeys(pools, ""),
                                      excluded: read_list(listed).tag}
    with pytest.raises(InputError, match="2 different exclusion lists .*EXCLUDE="):
        build_report(place.runs_root, corpus.name, seed=1)
    chosen = build_report(place.runs_root, corpus.name, seed=1, exclude=str(listed))
    none = build_report(place.runs_root, corpus.name, seed=1, exclude="none")
    assert chosen.markdown != none.markdown
    assert dict(chosen.provenance.about)["rebuild this page"] == (
        f"make report CORPUS={corpus.name} SEED=1 EXCLUDE={listed}")
    shown = {tag: set(load_results(place.runs_root, corpus.name, 1, corpus.parent, tag)
                      .rows["pool"].to_list()) for tag in ("", read_list(listed).tag)}
    assert shown == {"": set(pools), read_list(listed).tag: {excluded}}


def test_an_edited_list_stops_only_its_own_pools(corpus_dir, tmp_path, fixture_queries,
                                                 caplog):
    """EXCLUDE edited after its pool was drawn, and the new list's pool built as advised: make
    eval's stages use the current pools and name the old one (one line each, counted), verify
    names it with the command that retires it, and retire-pool moves it aside with its runs
    (their numbers kept), after which nothing is skipped or reported."""
    from pipeline.cli.main import main
    from pipeline.verify import verify

    corpus = copy_corpus(corpus_dir, tmp_path / "corpora" / "small")
    roots = ["--corpora-root", str(tmp_path / "corpora"), "--index-root",
             str(tmp_path / "indexes"), "--runs-root", str(tmp_path / "runs")]
    listed = tmp_path / "specter.txt"
    listed.write_text(f"{fixture_queries[0]}\n")
    spec = dict(size=POOL_SIZES[0], queries=N_QUERIES, seed=1, exclude=str(listed))
    old = build_pool(corpus, PoolSpec(**spec))["name"]
    plain = build_pool(corpus, PoolSpec(size=POOL_SIZES[0], queries=N_QUERIES, seed=1))["name"]

    def stages() -> int:
        caplog.clear()
        with caplog.at_level("INFO"):
            return (main([*roots, "search", "--corpus", "small", "--model", "random",
                          "--stale-only", "--repair-pools"])
                    or main([*roots, "eval", "--corpus", "small", "--model", "random",
                             "--stale-only"]))

    assert stages() == 0
    evaluation = tmp_path / "runs" / "small" / old / "random.eval.json"
    kept = evaluation.read_bytes()
    listed.write_text(f"{fixture_queries[1]}\n")  # the same size, other papers
    new = build_pool(corpus, PoolSpec(**spec))["name"]
    assert new != old
    assert stages() == 0
    skipped = [r.getMessage() for r in caplog.records if f"pool {old} skipped" in r.getMessage()]
    assert len(skipped) == 3  # pools, search, eval: each says it
    assert all("has other papers" in line and f"make retire-pool CORPUS=small POOL={old}"
               in line for line in skipped)
    assert "1 of 3 pools skipped" in caplog.text
    assert (tmp_path / "runs" / "small" / new / "random.eval.json").exists()
    assert (tmp_path / "runs" / "small" / plain / "random.eval.json").exists()
    with pytest.raises(InputError, match=f"pool {old}: its EXCLUDE list .* has other papers"):
        load_pool(corpus, old)  # named explicitly: refused by the same rule
    data = Roots(tmp_path / "corpora", tmp_path / "indexes", tmp_path / "runs")
    problems = verify(data)
    assert len(problems) == 1 and problems[0].startswith(f"STALE {corpus / 'pools' / old}:")
    assert "has other papers" in problems[0]
    assert problems[0].endswith(f"make retire-pool CORPUS=small POOL={old} DATA={tmp_path} "
                                "(or put the old list back where it was)")
    # retire it: moved aside with its runs, nothing else touched
    assert main([*roots, "retire-pool", "--corpus", "small", "--pool", old]) == 0
    assert not (corpus / "pools" / old).exists()
    assert (corpus / "retired" / old / "manifest.json").exists()
    assert (tmp_path / "runs" / "small" / "retired" / old / "random.eval.json").read_bytes() \
        == kept
    assert verify(data) == []
    assert stages() == 0 and "skipped" not in caplog.text


def test_retire_pool_refuses_what_it_did_not_build(corpus_dir, tmp_path, capsys):
    """Only a pool the pipeline built is retired: a name that is a path, a folder it did not
    write, a pool that does not exist and an earlier retired pool of the same name are
    refused in one line, and nothing moves."""
    from pipeline.cli.main import main

    corpus = copy_corpus(corpus_dir, tmp_path / "corpora" / "small")
    pool = build_pool(corpus, PoolSpec(size=POOL_SIZES[0], queries=N_QUERIES))["name"]
    mine = corpus / "pools" / "all-5-r0"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    (corpus / "retired" / pool).mkdir(parents=True)
    roots = ["--corpora-root", str(tmp_path / "corpora"), "--index-root",
             str(tmp_path / "indexes"), "--runs-root", str(tmp_path / "runs")]
    for name, message in ((f"../../small/pools/{pool}", "a pool name is"),
                          ("all-5-r0", "not built by make pool"),
                          ("all-9-r0", "does not exist"),
                          (pool, "exists already"), ("notes", "malformed pool name")):
        try:
            status = main([*roots, "retire-pool", "--corpus", "small", "--pool", name])
        except SystemExit as exc:  # refused by the option's type
            status = exc.code
        error = capsys.readouterr().err
        assert status == 2, error
        assert message in error and len(error.strip().splitlines()) == 1, error
    assert (mine / "notes.txt").read_text() == "mine"
    assert (corpus / "pools" / pool / "manifest.json").exists()


def test_a_list_says_how_many_of_its_ids_it_matched(corpus_dir, tmp_path, fixture_queries,
                                                    caplog):
    """A list none of whose ids is a paper of the corpus gives a pool of a new name that is the
    pool without it: said in a warning (0 of N); a list that matches says how many it did."""
    corpus = copy_corpus(corpus_dir, tmp_path / "corpora" / "small")
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("999999991\n999999992\n")
    listed = tmp_path / "listed.txt"
    listed.write_text(f"{fixture_queries[0]}\n{fixture_queries[1]}\n999999991\n")
    with caplog.at_level("INFO"):
        built = build_pool(corpus, PoolSpec(size=POOL_SIZES[0], queries=N_QUERIES,
                                            exclude=str(elsewhere)))
        matched = build_pool(corpus, PoolSpec(size=POOL_SIZES[0], queries=N_QUERIES,
                                              exclude=str(listed)))
    none = [r for r in caplog.records if "0 of its 2 ids are prefiltered papers" in r.getMessage()]
    assert len(none) == 1 and none[0].levelname == "WARNING"
    assert "matches no paper here" in none[0].getMessage()
    assert any("0 of its 2 ids" in line for line in built["warnings"])
    assert f"{matched['name']}: EXCLUDE {listed}: 2 of its 3 ids are prefiltered" in caplog.text
    assert not matched["warnings"]


def test_pools_paper_blames_the_list_and_names_its_own_variables(corpus_dir, tmp_path,
                                                                  monkeypatch, capsys):
    """make pools-paper with a list that leaves (nearly) no 2019 paper: the error gives the
    list's share, never the query year, and names PAPER_QUERIES, not QUERIES."""
    from pipeline.cli.main import main
    from pipeline.cli.variables import FROM_MAKE

    corpus = copy_corpus(corpus_dir, tmp_path / "corpora" / "small")
    of_2019 = sorted(pl.read_parquet(corpus / "prefiltered.parquet")
                     .filter(pl.col("year") == 2019)["corpusid"].to_list())
    listed = tmp_path / "training.txt"
    monkeypatch.setenv(FROM_MAKE, "1")
    grid = ["--corpora-root", str(tmp_path / "corpora"), "--index-root",
            str(tmp_path / "indexes"), "--runs-root", str(tmp_path / "runs"), "pools-paper",
            "--corpus", "small", "--paper-sizes", "2000", "--paper-queries", "200",
            "--paper-field-size", "3000", "--paper-field-queries", "1", "--paper-repeats", "1",
            "--exclude", str(listed)]
    listed.write_text("".join(f"{i}\n" for i in of_2019))
    assert main(grid) == 2
    error = capsys.readouterr().err
    assert f"leaves out {len(of_2019)} of the {len(of_2019)} prefiltered 2019 papers " \
           "(100.0%)" in error and "QUERY_YEAR" not in error and "query-year" not in error
    listed.write_text("".join(f"{i}\n" for i in of_2019[12:]))
    assert main(grid) == 2
    error = capsys.readouterr().err
    assert "validation pool" in error and "test pools use all of them" in error
    assert f"after the EXCLUDE list leaves out {len(of_2019) - 12} of the {len(of_2019)}" in error
    assert "PAPER_QUERIES" in error and " QUERIES" not in error, error
