"""The judging wired through the API and the report (pipeline/judging/stage.py,
pipeline/report/judged.py): pipeline.judge samples each pool's unjudged top-ranked candidates
from the named models' runs, judges them and writes the judgments, byte-identical on rerun;
a person's labels give the same judgments as the grades they carry; the judging page shows
every drawn pair once; the report's "Beyond citations" section equals the estimators run on
the same files through pipeline.inferred, and names its stand-in; judge_agreement through
the API equals scikit-learn's kappa; bad input is one line, before anything is written."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.core.files import read_json
from pipeline.judging.assessor import LABELS_HEADER, FileAssessor, StandinAssessor
from pipeline.judging.sample import pairs_to_judge
from pipeline.judging.stage import sampling
from pipeline.layout import (
    JUDGING_SAMPLE,
    agreement_paths,
    judging_folders,
    judging_page_path,
    judgments_manifest,
    judgments_path,
    run_paths,
    sample_path,
    table_file,
)
from tests.conftest import CHILD_BOUND_S, POOL_SEED, POOL_SIZES, pool_of
from tests.judging.test_agreement import csf  # noqa: F401 (the CSFCube corpus fixture)

MODELS = ("bm25", "random")
STANDIN = StandinAssessor(1)
N = 12  # pairs per query
SAMPLING = sampling(list(MODELS), N).name  # the folder of the sample and its judgments


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.fixture(scope="module")
def judged(corpus_dir, tmp_path_factory) -> tuple[pipeline.Data, str, pl.DataFrame]:
    """The fixture corpus's pools searched and scored with BM25 and the random floor, then
    judged by the stand-in through the API."""
    root = tmp_path_factory.mktemp("wiring")
    data = pipeline.Data(corpora=corpus_dir.parent, indexes=root / "indexes",
                         runs=root / "runs")
    corpus = corpus_dir.name
    for size in POOL_SIZES:
        for model in MODELS:
            pipeline.search(data, corpus, pool_of(size), model, threads=1)
            pipeline.evaluate(data, corpus, pool_of(size), model)
    counts = pipeline.judge(data, corpus, list(MODELS), STANDIN.name, sample=N)
    return data, corpus, counts


def test_judge_samples_and_judges_every_pool_and_rewrites_nothing(judged):
    data, corpus, counts = judged
    assert sorted(counts["pool"]) == sorted(pool_of(s) for s in POOL_SIZES)
    for row in counts.iter_rows(named=True):
        sample = pl.read_parquet(sample_path(data.runs, corpus, row["pool"], SAMPLING))
        drawn = pairs_to_judge(sample)
        assert row["drawn"] == drawn.height == row["graded"] > 0  # the stand-in grades all
        assert row["queries"] == sample["query"].n_unique()
        assert drawn.group_by("query").len()["len"].max() <= N
        # none drawn is cited: the citations stay as they are
        qrels = pl.read_parquet(data.corpus(corpus) / "pools" / row["pool"] / "qrels.parquet")
        assert drawn.join(qrels, on=["query", "doc"]).height == 0
        path = judgments_path(data.runs, corpus, row["pool"], STANDIN.file_name,
                              SAMPLING)
        graded = pl.read_parquet(path)
        assert graded.select("query", "doc").equals(drawn)
        assert graded["grade"].n_unique() > 1 and set(graded["assessor"]) == {STANDIN.name}
        assert '"stand_in": true' in judgments_manifest(path).read_text()
    before = files(data.runs / corpus)
    again = pipeline.judge(data, corpus, ",".join(MODELS), STANDIN.name, sample=N)
    assert again.equals(counts)
    assert files(data.runs / corpus) == before  # byte-identical, manifests included


def test_a_persons_labels_give_the_judgments_they_carry(judged, tmp_path):
    """The labels the judging page would download, holding the stand-in's grades, read back by
    JUDGE=file: give the same graded pairs (another assessor's files beside them)."""
    data, corpus, _ = judged
    pool = pool_of(POOL_SIZES[0])
    theirs = pl.read_parquet(judgments_path(data.runs, corpus, pool, STANDIN.file_name,
                                                SAMPLING))
    labels = tmp_path / "labels-mine.tsv"
    labels.write_text("\t".join(LABELS_HEADER) + "\n" + "".join(
        f"{q}\t{d}\t{g}\tann\t2026-11-26T10:00:00Z\n" for q, d, g in
        theirs.select("query", "doc", "grade").iter_rows()))
    pipeline.judge(data, corpus, list(MODELS), f"file:{labels}", sample=N)
    mine = pl.read_parquet(judgments_path(data.runs, corpus, pool, FileAssessor(labels).file_name,
                                              SAMPLING))
    assert mine.select("query", "doc", "grade").equals(theirs.select("query", "doc", "grade"))
    assert set(mine["assessor"]) == {"ann"}


def test_labels_of_no_sampled_pair_are_counted_and_none_matching_is_refused(judged, tmp_path,
                                                                           caplog):
    """Labels of pairs outside the samples (drawn with other settings; here query ids written
    with a leading zero) are counted in the log and each pool's judgments' manifest; a file
    none of whose labels names a sampled pair is refused before anything is written."""
    data, corpus, _ = judged
    pools = [pool_of(size) for size in POOL_SIZES]
    samples = {pool: {(str(q), str(d)) for q, d in pairs_to_judge(pl.read_parquet(
        sample_path(data.runs, corpus, pool, SAMPLING))).iter_rows()} for pool in pools}
    drawn = sorted(set().union(*samples.values()))
    foreign = [(f"0{q}", d) for q, d in drawn[:5]]

    def labels(name: str, pairs: list[tuple[str, str]]) -> Path:
        path = tmp_path / name
        path.write_text("\t".join(LABELS_HEADER) + "\n" + "".join(
            f"{q}\t{d}\t2\tann\t2026-11-29T10:00:00Z\n" for q, d in pairs))
        return path

    other = labels("labels-other.tsv", foreign)
    with pytest.raises(InputError, match=r"none of its 5 labels names a pair of the samples of "
                       r"MODELS=bm25,random SAMPLE=12 .*: the labels were probably drawn with "
                       r"other settings \(SAMPLE, MODELS, POOL\)"):
        pipeline.judge(data, corpus, list(MODELS), f"file:{other}", sample=N)
    name = FileAssessor(other).file_name
    assert not any(judgments_path(data.runs, corpus, pool, name, SAMPLING).exists()
                   or judgments_manifest(judgments_path(data.runs, corpus, pool, name,
                                                        SAMPLING)).exists() for pool in pools)
    mixed = labels("labels-mixed.tsv", [*drawn[:3], *foreign])
    with caplog.at_level("INFO"):
        pipeline.judge(data, corpus, list(MODELS), f"file:{mixed}", sample=N)
    assert "5 of its 8 labels name no pair of the samples of MODELS=bm25,random" in caplog.text
    for pool in pools:
        unused = sum(pair not in samples[pool] for pair in [*drawn[:3], *foreign])
        path = judgments_path(data.runs, corpus, pool, FileAssessor(mixed).file_name, SAMPLING)
        assert read_json(judgments_manifest(path))["counts"]["labels_outside"] == unused >= 5
        assert f"{unused} of the file's 8 labels name no pair of this sample" in caplog.text


def test_the_judging_page_shows_every_drawn_pair_once(judged):
    data, corpus, _ = judged
    out = pipeline.judge_page(data, corpus, list(MODELS), sample=N)
    assert out == judging_page_path(data.runs, corpus) and out.is_file()
    drawn = pl.concat([pairs_to_judge(pl.read_parquet(sample_path(data.runs, corpus,
                                                                  pool_of(s), SAMPLING)))
                       for s in POOL_SIZES]).unique()
    assert f"Judging {corpus}: {drawn.height} pairs" in out.read_text()
    assert drawn.height < sum(  # nested pools share pairs: each is shown once
        pairs_to_judge(pl.read_parquet(sample_path(data.runs, corpus, pool_of(s),
                                                    SAMPLING))).height
        for s in POOL_SIZES)


def cell(text: str) -> float:
    """A table cell's number, without the interval after it (`12.3 [10.1, 14.0]`)."""
    return float(text.split(" [")[0])


def assert_means_are_inferred(frame: pl.DataFrame, corpus: Path, runs: Path, pools: list[str],
                              models: tuple[str, ...], assessor: StandinAssessor) -> None:
    """The report's table of judged means (`frame`: pools, metric, model, citations, with the
    sample) shows, for each pool and model, infAP with the sample as pipeline.inferred gives
    it on the same files (the pool's qrels, the model's run, `assessor`'s judgments, the
    sample), to the table's one decimal; and the sample moves at least one number away from
    what the citations alone say (else the section shows nothing the citations do not)."""
    moved = 0
    for pool in pools:
        qrels = pl.read_parquet(corpus / "pools" / pool / "qrels.parquet")
        [folder] = judging_folders(runs, corpus.name, pool)  # one sampling setting judged
        judgments = pl.read_parquet(folder / table_file(assessor.file_name))
        sample = pl.read_parquet(folder / table_file(JUDGING_SAMPLE))
        assert set(judgments["assessor"]) == {assessor.name} and judgments.height > 0, pool
        size = pool.split("-")[1]  # as the table's pools column ends (format_size)
        for model in models:
            run = pl.read_parquet(run_paths(runs, corpus.name, pool, model).parquet)
            theirs = pipeline.inferred(qrels, run.select("query", "doc", "score"), judgments,
                                       sample)
            row = frame.filter(pl.col("model") == model, pl.col("metric") == "infAP",
                               pl.col("pools").str.ends_with(f" {size}"))
            assert row.height == 1, (model, pool, frame)
            shown = cell(row["with the sample"][0])
            assert shown == pytest.approx(100 * theirs["infAP"], abs=0.051), (model, pool)
            moved += shown != cell(row["citations"][0])
    assert moved > 0  # the judged sample changes what the citations alone say


def test_the_reports_section_is_the_estimators_on_the_same_files(judged):
    data, corpus, _ = judged
    report = pipeline.build_report(data, corpus, seed=POOL_SEED)
    section = report.section("judged")
    stem = STANDIN.file_name
    names = [t.name for t in section.tables]
    assert f"judged-{stem}-means" in names and f"judged-{stem}-pairs" in names
    means = report.tables[f"judged-{stem}-means"]
    assert "stand-in" in means.caption and "NOT a judgment" in means.caption
    assert_means_are_inferred(means.frame(), data.corpus(corpus), data.runs,
                              [pool_of(s) for s in POOL_SIZES], MODELS, STANDIN)
    pairs = report.tables[f"judged-{stem}-pairs"].frame()
    assert set(pairs["pair"]) == {"bm25 - random"}
    assert pairs["order"].str.contains(
        r"^(kept|reversed|not determined|ordered by the sample)").all()
    missed = report.tables[f"judged-{stem}-missed"].frame()
    assert sorted(missed["pool"]) == sorted(pool_of(s) for s in POOL_SIZES)
    assert f"judged-{stem}" in [p.name for p in section.plots]  # one per assessor
    report.save()  # the plot drawn, and the files verify finds whole
    assert (data.runs / "reports" / f"{corpus}-judged-{stem}.png").stat().st_size > 0
    assert pipeline.verify_data(data, data.runs / corpus) == []


def test_judge_agreement_through_the_api_is_sklearns_kappa(csf):  # noqa: F811
    from sklearn.metrics import cohen_kappa_score

    data, _, grades = csf
    result = pipeline.judge_agreement(data, "csf", "standin:0")
    table = pl.read_parquet(agreement_paths(data.runs, "csf", "standin-0")[0])
    assert table.equals(result.summary)
    from pipeline.judging.agreement import expert_pairs
    from pipeline.judging.assessor import Pair

    standin = StandinAssessor(0)
    pairs = expert_pairs(data.corpus("csf"))
    theirs = {(p["query"], p["doc"]): standin.grade(Pair(
        p["query"], p["doc"], p["query_title"], p["query_abstract"], p["doc_title"],
        p["doc_abstract"])) for p in pairs.iter_rows(named=True)}
    keys = sorted(set(grades) & set(theirs))
    expected = cohen_kappa_score([grades[k] for k in keys], [theirs[k] for k in keys],
                                 weights="linear", labels=[0, 1, 2, 3])
    overall = result.summary.filter(pl.col("facet") == "all").row(0, named=True)
    assert overall["kappa_linear"] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("call", "says"), [
    (lambda d, c: pipeline.judge(d, c, ["bm25", "random"], "nobody:1"),
     "judge='nobody:1'.*api:<model>"),
    (lambda d, c: pipeline.judge(d, c, ["bm25", "random"], "standin:1", sample=0),
     "sample=0"),
    (lambda d, c: pipeline.judge(d, c, ["bm25", "random"], "standin:1", sample=2),
     "SAMPLE=2: .*at least 3"),
    (lambda d, c: pipeline.judge(d, c, ["bm25", "bm25"], "standin:1"), "each once"),
    (lambda d, c: pipeline.judge(d, c, ["bm25", "scincl"], "standin:1"),
     "no pool .* runs of every model"),
    (lambda d, c: pipeline.judge(d, c, ["bm25"], "api:m"), "judge='api:m' needs judge_url,"),
    (lambda d, c: pipeline.judge(d, c, ["bm25"], "file:/nowhere/labels.tsv"),
     "judge='file:/nowhere/labels.tsv': no such file"),
    (lambda d, c: pipeline.judge(d, c, ["bm25"], "api:m", judge_url="ftp://x"),
     "JUDGE_URL='ftp://x'"),
])
def test_bad_input_is_one_line_and_writes_nothing(judged, call, says, monkeypatch):
    data, corpus, _ = judged
    monkeypatch.delenv("JUDGE_URL", raising=False)
    before = files(data.runs / corpus)
    with pytest.raises(InputError, match=says) as refused:
        call(data, corpus)
    assert "\n" not in str(refused.value)
    assert files(data.runs / corpus) == before


def test_the_command_line_judges_as_the_api_did(judged, tmp_path):
    """`python -m pipeline judge` (what make judge runs) with the API's settings rewrites
    nothing; a bad JUDGE is one line and exit status 2."""
    import subprocess
    import sys

    data, corpus, _ = judged
    roots = ["--corpora-root", str(data.corpora), "--index-root", str(data.indexes),
             "--runs-root", str(data.runs)]
    before = files(data.runs / corpus)
    argv = [sys.executable, "-m", "pipeline", *roots, "judge", "--corpus", corpus,
            "--models", ",".join(MODELS), "--sample", str(N)]
    done = subprocess.run([*argv, "--judge", STANDIN.name], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], timeout=CHILD_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    after = files(data.runs / corpus)
    assert {k: v for k, v in after.items() if not k.startswith("times")} == {
        k: v for k, v in before.items() if not k.startswith("times")}
    bad = subprocess.run([*argv, "--judge", "nobody:1"], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2], timeout=CHILD_BOUND_S)
    assert bad.returncode == 2 and "nobody:1" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    env = {k: v for k, v in os.environ.items() if k != "JUDGE_URL"}
    labels = tmp_path / "labels.tsv"
    labels.write_text("query\tdoc\tgrade\n")
    for judge, says in (("api:m", "--judge api:m needs --judge-url,"),
                        (f"file:{labels}", f"--judge file:{labels}: its first line is not")):
        bad = subprocess.run([*argv, "--judge", judge], capture_output=True, text=True, env=env,
                             cwd=Path(__file__).resolve().parents[2], timeout=CHILD_BOUND_S)
        assert bad.returncode == 2 and says in bad.stderr, bad.stderr  # the command line's words
        assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr
