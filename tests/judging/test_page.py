"""The judging page (pipeline/judging/page.py): one self-contained HTML file, the same bytes
when written again, hostile paper texts kept as data; and in the project's headless browser
(Debian's chromium through selenium, tests/report/test_report_browser.py's helpers): grades
given with the keyboard are kept in localStorage, survive a reload, undo takes them back, and
the downloaded TSV is read back by the file assessor's reader as the keys pressed."""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import polars as pl
import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.judging.assessor import GRADES, LABELS_HEADER, MISSING_TEXT, PROMPT, read_labels
from pipeline.judging.page import (
    PAGE_SCRIPT,
    PAGE_STYLE,
    PAGE_TEMPLATE,
    grade_meanings,
    page_data,
    write_page,
)
from pipeline.judging.sample import pairs_to_judge
from pipeline.judging.stage import sampling
from pipeline.layout import judging_page_path, pool_names, sample_path
from tests.conftest import CHILD_BOUND_S

ROOT = Path(__file__).resolve().parents[2]
# a title that would run script or add elements if the page wrote it as HTML, and text that
# JSON, HTML and JavaScript treat specially: quotes, &, U+2028, a surrogate pair, right-to-left
HOSTILE = ("</script><!--<script>window.pwned = 1</script><img src=x "
           "onerror=\"window.pwned = 2\"> \"quoted\" & 'single' Zoë ½ \u2028 🧪 עברית")
HOSTILE_ABSTRACT = "line one\nline two <b>not bold</b> &amp; ]]> `${x}`"


def corpus() -> pl.DataFrame:
    """Two query papers (1, 2) and four candidates (10-13); one candidate's title hostile,
    one query's abstract hostile, one candidate without an abstract."""
    return pl.DataFrame({
        "corpusid": [1, 2, 10, 11, 12, 13],
        "title": ["Graph neural networks for citation recommendation",
                  "BM25 at scale", "Dense retrieval of papers", HOSTILE,
                  "Pooling candidates", "Inverted indexes"],
        "abstract": ["We recommend citations.", HOSTILE_ABSTRACT, "Encoders.",
                     "An abstract.", None, "Postings lists."]},
        schema={"corpusid": pl.Int64, "title": pl.String, "abstract": pl.String})


# the pairs in the page's order (query, then candidate): 6 pairs, 3 per query
PAIRS = pl.DataFrame({"query": [2, 1, 1, 2, 1, 2], "doc": [13, 11, 10, 10, 12, 12]})
ORDER = [("1", "10"), ("1", "11"), ("1", "12"), ("2", "10"), ("2", "12"), ("2", "13")]


def data_block(page: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="judging-data">(.*?)'
                                r"</script>", page, re.DOTALL).group(1))


# ---- the file ----------------------------------------------------------------------------------
def test_the_page_is_one_file_the_same_when_written_again(tmp_path):
    first, again = tmp_path / "a" / "page.html", tmp_path / "b" / "page.html"
    digest = write_page(PAIRS, corpus(), first)
    assert write_page(PAIRS.reverse(), corpus(), again) == digest  # the rows' order: no matter
    assert first.read_bytes() == again.read_bytes()
    page = first.read_text(encoding="utf-8")
    # nothing fetched: no link, no src, no address outside the papers' texts (data); its
    # style and script inside
    markup = page.replace(page.split('id="judging-data">')[1].split("</script>")[0], "")
    assert not re.search(r"<link|\ssrc=|https?://|@import|url\(", markup)
    assert page.count("<script") == 2 and page.count("</script>") == 2
    for asset in (PAGE_STYLE, PAGE_SCRIPT):
        shipped = (ROOT / "pipeline" / "judging" / asset).read_text(encoding="utf-8")
        assert shipped in page
    data = data_block(page)
    assert [tuple(pair) for pair in data["pairs"]] == ORDER
    assert data["places"] == [[1, 1, 3], [1, 2, 3], [1, 3, 3], [2, 1, 3], [2, 2, 3], [2, 3, 3]]
    assert data["digest"] == digest and data["file"] == f"labels-{digest[:12]}.tsv"
    assert data["header"] == list(LABELS_HEADER) and data["missing"] == MISSING_TEXT
    # another text is another page: its labels are kept under another key
    changed = corpus().with_columns(title=pl.col("title").str.replace("BM25", "BM 25"))
    assert write_page(PAIRS, changed, tmp_path / "c.html") != digest


def test_hostile_texts_stay_data(tmp_path):
    """Every text comes back from the data block as it was given, and no text adds or ends a
    script element (the page's two are its only ones)."""
    out = tmp_path / "page.html"
    write_page(PAIRS, corpus(), out)
    page = out.read_text(encoding="utf-8")
    assert "<img" not in page and "<!--<script" not in page and "<b>" not in page
    assert page.isascii()  # the data is ASCII JSON: \u2028 and the emoji as escapes
    papers = data_block(page)["papers"]
    texts = {str(i): [t, a] for i, t, a in corpus().iter_rows()}
    assert papers == {i: texts[i] for i in ("1", "2", "10", "11", "12", "13")}
    assert papers["11"][0] == HOSTILE and papers["2"][1] == HOSTILE_ABSTRACT
    assert papers["12"][1] is None  # shown as MISSING_TEXT, as the LLM's prompt shows it


def test_the_grades_are_the_llm_prompts_definitions():
    meanings = grade_meanings()
    assert list(meanings) == list(GRADES)
    for grade, words in meanings.items():
        assert f"\n{grade} = {words}" in PROMPT
    assert data_block_grades() == [[g, meanings[g]] for g in GRADES]
    assert len(set(meanings.values())) == len(GRADES)


def data_block_grades() -> list:
    return page_data(PAIRS, corpus())["grades"]


def test_any_frame_of_pairs_is_taken(tmp_path):
    """The sample as sample.py writes it (its drawn rows only), a `docid` column, ids as
    text: the same pairs."""
    sample = PAIRS.with_columns(pool=pl.lit("all-1k-r0"), best_rank=pl.lit(1, pl.Int64),
                                sampled=pl.Series([True] * 6))
    undrawn = pl.DataFrame({"query": [1], "doc": [13], "pool": ["all-1k-r0"],
                            "best_rank": [40], "sampled": [False]})
    expected = page_data(PAIRS, corpus())
    assert page_data(pl.concat([sample, undrawn], how="diagonal"), corpus()) == expected
    assert page_data(PAIRS.rename({"doc": "docid"}), corpus()) == expected
    assert page_data(PAIRS.cast(pl.String), corpus()) == expected


@pytest.mark.parametrize(("pairs", "papers", "says"), [
    (PAIRS.rename({"doc": "candidate"}), corpus(), "give a frame with `query` and `doc`"),
    (PAIRS.clear(), corpus(), "no pairs to judge"),
    (pl.DataFrame({"query": [1], "doc": [None]}, schema={"query": pl.Int64, "doc": pl.Int64}),
     corpus(), "an empty query or doc id"),
    (pl.DataFrame({"query": [1], "doc": [99]}), corpus(), "a doc paper the corpus lacks"),
    (pl.DataFrame({"query": ["1"], "doc": ["ten"]}), corpus(), "not the papers' corpus ids"),
    (pl.DataFrame({"query": ["q1"], "doc": ["d\t1"]}),
     pl.DataFrame({"corpusid": ["q1", "d\t1"], "title": ["a", "b"], "abstract": ["", ""]}),
     "cannot carry an id"),
])
def test_bad_pairs_are_one_line(tmp_path, pairs, papers, says):
    out = tmp_path / "page.html"
    with pytest.raises(InputError) as raised:
        write_page(pairs, papers, out)
    assert says in str(raised.value) and "\n" not in str(raised.value)
    assert not out.exists()


def test_the_assets_ship_with_the_package():
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())[
        "tool"]["setuptools"]["package-data"]["pipeline"]
    for asset in (PAGE_TEMPLATE, PAGE_STYLE, PAGE_SCRIPT):
        path = f"judging/{asset}"
        assert (ROOT / "pipeline" / path).is_file()
        assert any(fnmatch.fnmatch(path, pattern) for pattern in package_data), path


# ---- in the browser --------------------------------------------------------------------------
def shown(driver) -> dict:
    """What the page shows now: progress, the pair's ids and texts, the status line."""
    return driver.execute_script("""
        const t = (id) => document.getElementById(id).textContent;
        return {progress: t("progress"), query: t("query-id"), doc: t("candidate-id"),
                query_title: t("query-title"), query_abstract: t("query-abstract"),
                title: t("candidate-title"), abstract: t("candidate-abstract"),
                done: !document.getElementById("done").hidden,
                asking: !document.getElementById("name-form").hidden, status: t("status")};""")


def stored(driver, digest: str) -> list[int]:
    """The grades the page keeps in localStorage, in order."""
    return driver.execute_script(
        "const s = JSON.parse(localStorage.getItem(arguments[0]));"
        "return s ? s.labels.map((l) => l.grade) : null;", f"mdcr-judging:{digest}")


def press(driver, *keys: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    for key in keys:
        ActionChains(driver).send_keys(key).perform()


def downloaded(folder: Path) -> Path:
    """The TSV file chromium has finished writing to `folder` (waited for up to a minute: a
    download is written after the key press returns)."""
    for _ in range(600):
        found = list(folder.iterdir())
        done = [p for p in found if p.suffix == ".tsv"]
        if done and not any(p.suffix == ".crdownload" for p in found):
            assert len(done) == 1, found
            return done[0]
        time.sleep(0.1)
    raise AssertionError(f"no download in {folder}: {list(folder.iterdir())}")


@pytest.mark.slow  # a browser
def test_keyboard_labels_are_kept_undone_and_downloaded(tmp_path):
    from selenium.webdriver.common.keys import Keys

    from tests.report.test_report_browser import headless_chromium, install_chromium

    page = tmp_path / "page.html"
    digest = write_page(PAIRS, corpus(), page, title="Judging <all-1k-r0> & co")
    folder = tmp_path / "downloads"
    folder.mkdir()
    driver = headless_chromium(*install_chromium())
    try:
        driver.execute_cdp_cmd("Browser.setDownloadBehavior",
                               {"behavior": "allow", "downloadPath": str(folder)})
        driver.get(page.as_uri())
        assert driver.title == "Judging <all-1k-r0> & co"
        now = shown(driver)
        assert now["progress"] == "0 of 6 judged" and (now["query"], now["doc"]) == ORDER[0]
        assert now["query_title"] == corpus()["title"][0]
        assert driver.execute_script("return document.querySelectorAll('#grades li').length") \
            == len(GRADES)

        press(driver, "2")  # the hostile candidate is shown next: as text
        now = shown(driver)
        assert (now["doc"], now["title"]) == ("11", HOSTILE)
        assert driver.execute_script("""return [window.pwned === undefined,
            document.scripts.length, document.images.length]""") == [True, 2, 0]
        press(driver, "0", "3")
        assert stored(driver, digest) == [2, 0, 3]
        assert shown(driver)["progress"] == "3 of 6 judged"

        driver.refresh()  # the labels survive a reload: the page resumes at the fourth pair
        now = shown(driver)
        assert now["progress"] == "3 of 6 judged" and (now["query"], now["doc"]) == ORDER[3]
        assert now["query_abstract"] == HOSTILE_ABSTRACT  # query 2's, line break and all
        assert stored(driver, digest) == [2, 0, 3]

        press(driver, "u")  # undo, then Backspace: back to the second pair
        now = shown(driver)
        assert now["progress"] == "2 of 6 judged" and (now["query"], now["doc"]) == ORDER[2]
        assert "Undone: grade 3" in now["status"]
        press(driver, Keys.BACKSPACE)
        assert stored(driver, digest) == [2]
        assert (shown(driver)["doc"], shown(driver)["progress"]) == ("11", "1 of 6 judged")

        press(driver, "1", "3", "0")  # the third pair has no abstract: the prompt's stand-in
        press(driver, "2", "1")
        now = shown(driver)
        assert now["done"] and now["progress"] == "6 of 6 judged"
        press(driver, "3")  # nothing left to grade: nothing changes
        grades = [2, 1, 3, 0, 2, 1]
        assert stored(driver, digest) == grades

        press(driver, "d")  # the name is asked once, at the first download
        assert shown(driver)["asking"]
        name = driver.find_element("id", "name")
        name.send_keys("  Zoë O'Brien <b>  ", Keys.ENTER)
        first = downloaded(folder)
        assert first.name == f"labels-{digest[:12]}.tsv"
        labels, _ = read_labels(first)
        assert {pair: grade for pair, (grade, _, _) in labels.items()} == dict(
            zip(ORDER, grades, strict=True))
        assert {person for _, person, _ in labels.values()} == {"Zoë O'Brien <b>"}
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", when)
                   for _, _, when in labels.values())
        lines = first.read_text(encoding="utf-8").splitlines()
        assert lines[0] == "\t".join(LABELS_HEADER)
        assert [tuple(line.split("\t")[:3]) for line in lines[1:]] == [
            (q, d, str(g)) for (q, d), g in zip(ORDER, grades, strict=True)]

        first.rename(tmp_path / first.name)  # headless chromium writes over a file of the name
        press(driver, "u", "d")  # after an undo, a download without asking: 5 labels
        assert not shown(driver)["asking"]
        second = downloaded(folder)
        again, _ = read_labels(second)
        assert again == {pair: labels[pair] for pair in ORDER[:5]}
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert not errors
    finally:
        driver.quit()


# ---- a collection's queries: their own text ---------------------------------------------------
@pytest.fixture(scope="module")
def claims(tmp_path_factory) -> pipeline.Data:
    """A BEIR-layout collection as SciFact's (claims as queries, one claim's id "1" also a
    document's), imported and searched by BM25 through the API: its queries are no papers of
    the corpus."""
    src = tmp_path_factory.mktemp("claims") / "scifact"
    (src / "qrels").mkdir(parents=True)
    topics = ["statins stroke risk", "aspirin migraine prevention"]
    docs = [{"_id": str(i), "title": f"Document {i} on {topics[i % 2]}",
             "text": f"Abstract {i}: {topics[i % 2]} in cohort {i}."} for i in range(1, 13)]
    queries = [{"_id": "1", "text": "Statins lower the risk of stroke."},
               {"_id": "100", "text": "Aspirin prevents migraines."}]
    for name, records in (("corpus.jsonl", docs), ("queries.jsonl", queries)):
        (src / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    (src / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n1\t2\t1\n1\t3\t0\n100\t1\t1\n100\t4\t0\n")
    root = tmp_path_factory.mktemp("claims-data")
    data = pipeline.Data(root)
    pipeline.import_beir(data, src, corpus="scifact")
    for pool in pool_names(data.corpus("scifact")):
        pipeline.search(data, "scifact", pool, "bm25", threads=1)
    return data


CLAIMS = {"1": ["Statins lower the risk of stroke.", ""],
          "100": ["Aspirin prevents migraines.", ""]}  # shown as MISSING_TEXT


def test_a_collections_queries_are_shown_by_their_own_text(claims):
    """make judge-page on a BEIR collection: once "2 pairs name a query paper the corpus
    lacks" (or, where a claim's id is a document's, that document's text as the query); now
    the page shows each query by its own text, as make judge sends it to the assessor, and
    each candidate by its document's."""
    out = pipeline.judge_page(claims, "scifact", ["bm25"], sample=3)
    data = data_block(out.read_text(encoding="utf-8"))
    queries = {q for q, _ in data["pairs"]}
    assert queries == set(CLAIMS) and data["queries"] == 2
    assert data["query_texts"] == CLAIMS
    # the candidates: the documents' texts, document 1's its own (not the claim of query 1)
    docs = {d for _, d in data["pairs"]}
    assert set(data["papers"]) == docs
    for doc in docs:
        title, abstract = data["papers"][doc]
        assert title.startswith(f"Document {doc} on ") and abstract.startswith(f"Abstract {doc}:")
    # the pairs are those make judge draws and judges (the same sample)
    drawn = pl.concat([pairs_to_judge(pl.read_parquet(sample_path(
        claims.runs, "scifact", pool, sampling(["bm25"], 3).name)))
        for pool in pool_names(claims.corpus("scifact"))]).unique().sort("query", "doc")
    assert [tuple(p) for p in data["pairs"]] == [(str(q), str(d)) for q, d in drawn.iter_rows()]


def test_the_cli_writes_a_collections_page(claims):
    """`python -m pipeline judge-page` on the collection: exit 0, the page written (once
    exit 2: "pairs name a query paper the corpus lacks")."""
    page = judging_page_path(claims.runs, "scifact")
    page.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "--corpora-root", str(claims.corpora),
         "--index-root", str(claims.indexes), "--runs-root", str(claims.runs), "judge-page",
         "--corpus", "scifact", "--models", "bm25", "--sample", "3"],
        cwd=ROOT, capture_output=True, text=True, timeout=CHILD_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert data_block(page.read_text(encoding="utf-8"))["query_texts"] == CLAIMS


@pytest.mark.slow  # a browser
def test_a_collections_query_is_shown_by_its_own_text_in_the_browser(claims):
    """Query "1" is a claim whose id is also a document's: the page shows the claim (never
    document 1's title) under the heading "Query", and a grade is kept for the pair."""
    from tests.report.test_report_browser import headless_chromium, install_chromium

    page = pipeline.judge_page(claims, "scifact", ["bm25"], sample=3)
    data = data_block(page.read_text(encoding="utf-8"))
    driver = headless_chromium(*install_chromium())
    try:
        driver.get(page.as_uri())
        now = shown(driver)
        query, doc = data["pairs"][0]
        assert (now["query"], now["doc"]) == (query, doc)
        assert now["query_title"] == CLAIMS[query][0]
        assert now["query_abstract"] == MISSING_TEXT
        assert now["title"] == data["papers"][doc][0]
        assert driver.execute_script(
            "return document.getElementById('query-kind').textContent") == "Query"
        press(driver, "2")
        assert stored(driver, data["digest"]) == [2]
        assert f"candidate {doc} for query {query}." in shown(driver)["status"]
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert not errors
    finally:
        driver.quit()
