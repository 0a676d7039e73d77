"""Read the CSFCube release (Mysore et al. 2021: faceted query by example over computer science
papers) into a corpus with one pool per facet, so embed, index, search and eval run on it
unchanged and score it as CSFCube's own evaluation scripts do.

Input folder (the release, as published): `test-pid2anns-csfcube-<facet>.json` for the facets
background, method and result (`{query paper id: {"cands": [ids], "relevance_adju": [grades
0-3], ...}}`: each query's candidate list and its adjudicated grades; the annotators' own
grades are not read), `abstracts-csfcube-preds.jsonl` (one paper per line: `paper_id`, `title`,
`abstract` as a list of sentences, `pred_labels` one facet label per sentence), and
`queries-release.csv` (`pid`, `facet`, `year`, `title`, `paper type`) and
`evaluation_splits.json` (per facet and for "all", the query-facet ids `<pid>_<facet>` of
`fold1_test` and `fold2_test`, and of the dev folds, which are not read). The rest of the release
(`test-pid2pool-csfcube.json`, the readable annotations, the scripts) is not read.

Output `corpora/<name>/`: `prefiltered.parquet` (every query and candidate paper: corpusid as a
string, title, abstract = the sentences joined by a space, abstract_sentences = the release's
sentences, stripped, empty ones left out), a manifest with a `collection`
section, and the pools `csfcube-<facet>-<candidates>-r0`, one per facet:

- queries (`corpusid` = `<pid>_<facet>`, the official script's ids) carry their own text, the
  facet query: `title` = the query paper's title, `abstract` = the query paper's sentences of
  that facet (predicted labels, corrected by hand in the release for the query papers;
  `objective` counts as background, as ASPIRE does), so BM25 and dense encoders search with it;
  `paper` names the query paper and `sentences` its facet's sentences in the multi-vector
  store's numbering (the release's own split, kept: its first non-empty sentence is 1; the
  title is never a facet sentence), which ASPIRE-style models search with; `fold` is
  the query's test fold; `paper_type` is from queries-release.csv;
- candidates name their query (`query`, `corpusid`), so each query ranks its own list;
- qrels keep every adjudicated grade 0-3 (grade 0: listed, not relevant).

The query paper is never its own candidate: the release lists one (8781666, in its background
and result lists, grade 3), and the authors' published rankings (the SPECTER pools beside the
evaluation script) leave it out; so does the import, counting it (`query_itself_left_out`, per
facet and grade, in the manifests) and logging it. The pools are scored with the `csfcube`
metric set (the official NDCG%20 and MAP with grades >= 2 relevant, normalised over the ranked
list; pipeline/metrics.py), averaged over the two test folds as the official script
does.
"""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

import polars as pl

from pipeline.core.atomic import scratch_dir
from pipeline.core.checksums import fingerprint, fingerprints, sha256_file
from pipeline.core.errors import InputError
from pipeline.core.files import write_json, write_parquet
from pipeline.core.inputs import corpus_label
from pipeline.core.manifests import manifest
from pipeline.core.textfiles import read_json, text_lines, utf8_problem
from pipeline.corpus.install import claim_corpus, install_corpus
from pipeline.layout import (
    ABSTRACT_SENTENCES,
    CSFCUBE_ANNOTATIONS,
    CSFCUBE_PAPERS,
    CSFCUBE_QUERIES,
    CSFCUBE_SPLITS,
    MANIFEST,
    POOL_FILES,
    PREFILTERED,
    pool_dir,
    pool_name,
)

log = logging.getLogger(__name__)

STAGE = "import-csfcube"
LEVEL = "csfcube"  # the pools' level (results.parquet, the report's CSFCube table)
METRICS = "csfcube"  # their metric set (pipeline/layout.py)
FACETS = ("background", "method", "result")
# the release's files (judgments per facet, papers, queries, folds): pipeline/layout.py
ANNOTATIONS, PAPERS = CSFCUBE_ANNOTATIONS, CSFCUBE_PAPERS
QUERIES, SPLITS = CSFCUBE_QUERIES, CSFCUBE_SPLITS
TEST_FOLDS = ("fold1_test", "fold2_test")  # the official test score: the mean of their means
GRADES = range(4)  # adjudicated relevance 0-3
# a sentence's predicted label -> its facet (ASPIRE: objective is background; `other` is none)
LABEL_FACETS = {"background": "background", "objective": "background", "method": "method",
                "result": "result"}
LAYOUT = (f"SRC=<the CSFCube release folder> holding {ANNOTATIONS.format('<facet>')}, "
          f"{PAPERS}, {QUERIES} and {SPLITS}")


def _missing(path: Path) -> InputError:
    return InputError(f"{path} does not exist: give {LAYOUT}")


def _read_json(path: Path) -> tuple[object, int]:
    """The file's value and how many keys it repeats with the same value (pipeline.core.
    textfiles.read_json: a key repeated with another value is refused)."""
    if not path.is_file():
        raise _missing(path)
    return read_json(path, "is it the release's file?")


def _id(value: object, where: str) -> str:
    """A paper id as the release writes it (a string of digits); one a TREC file could not
    hold (empty, whitespace) or that is not a string is refused."""
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        raise InputError(f"{where}: the paper id {value!r} is not a string without whitespace, "
                         "as the release's ids are")
    return value


def read_annotations(path: Path, facet: str) -> tuple[pl.DataFrame, int, int]:
    """The judged candidates of one facet (query, doc, rel, order: the release's order), the
    number of repeated identical judgments dropped and of query entries repeated whole (the
    same key, the same value: read once). Refused: a query given twice with other contents, a
    query whose `cands` and `relevance_adju` differ in length or that has no candidate, a
    grade that is not 0-3, a candidate listed twice with two grades."""
    data, repeated_entries = _read_json(path)
    if not isinstance(data, dict) or not data:
        raise InputError(f"{path}: expected an object {{query paper id: {{\"cands\": [...], "
                         "\"relevance_adju\": [...]}}}} with at least one query")
    rows: list[tuple[str, str, int, int]] = []
    for query, entry in data.items():
        where = f"{path}: query {query}"
        _id(query, f"{path}")
        if not isinstance(entry, dict) or not isinstance(entry.get("cands"), list) or \
                not isinstance(entry.get("relevance_adju"), list):
            raise InputError(f"{where} has no \"cands\" and \"relevance_adju\" lists (the "
                             "candidates and their adjudicated grades)")
        cands, grades = entry["cands"], entry["relevance_adju"]
        if len(cands) != len(grades):
            raise InputError(f"{where}: {len(cands)} candidates but {len(grades)} grades in "
                             "relevance_adju; the lists must pair up")
        if not cands:
            raise InputError(f"{where} has no candidate: every query needs its judged pool")
        for order, (doc, grade) in enumerate(zip(cands, grades, strict=True)):
            if isinstance(grade, bool) or not isinstance(grade, int) or grade not in GRADES:
                raise InputError(f"{where}: candidate {doc} has the grade {grade!r}; CSFCube's "
                                 "adjudicated grades are the integers 0-3")
            rows.append((f"{query}_{facet}", _id(doc, where), grade, order))
    table = pl.DataFrame(rows, schema={"query": pl.String, "doc": pl.String, "rel": pl.Int32,
                                       "order": pl.Int64}, orient="row")
    clash = table.filter(pl.col("rel").n_unique().over("query", "doc") > 1)
    if clash.height:
        query, doc = clash.row(0)[:2]
        raise InputError(f"{path}: query {query.rsplit('_', 1)[0]} lists candidate {doc} twice "
                         "with different grades: keep one")
    kept = table.unique(["query", "doc"], keep="first", maintain_order=True)
    return kept, table.height - kept.height, repeated_entries


def leave_out_query_itself(judged: pl.DataFrame, where: Path) -> tuple[pl.DataFrame,
                                                                        pl.DataFrame]:
    """The judged candidates without each query's own paper (a query `<pid>_<facet>` never
    ranks the paper `<pid>`, as the authors' published rankings leave it out), and the pairs
    left out (query, doc, rel). A query left with no candidate is refused."""
    own = pl.col("doc") == pl.col("query").str.replace(r"_[^_]+$", "")
    removed = judged.filter(own).select("query", "doc", "rel")
    kept = judged.filter(~own)
    empty = sorted(set(removed["query"]) - set(kept["query"]))
    if empty:
        raise InputError(f"{where}: query {empty[0].rsplit('_', 1)[0]} lists only its own paper "
                         "as a candidate; a query is never its own candidate, so it has none")
    return kept, removed


def read_papers(path: Path) -> tuple[dict[str, dict], int]:
    """paper_id -> {title, sentences, labels (None when absent), line}; and how many records
    repeat an earlier one exactly (read once). A paper given twice with other contents, or a
    line that is not a JSON object with a string paper_id, a title, and an abstract that is a
    list of sentences, is refused with its line number; blank lines are skipped."""
    if not path.is_file():
        raise _missing(path)
    papers: dict[str, dict] = {}
    repeated = 0
    for number, line in text_lines(path, "is it the release's file?"):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not a JSON object ({exc.msg}); fix or remove the "
                             "line") from None
        if not isinstance(record, dict):
            raise InputError(f"{where}: not a JSON object; fix or remove the line")
        paper = _id(record.get("paper_id"), where)
        title, sentences = record.get("title"), record.get("abstract")
        labels = record.get("pred_labels")
        if not isinstance(title, str | None) or not isinstance(sentences, list) or \
                not all(isinstance(s, str) for s in sentences):
            raise InputError(f"{where}: paper {paper} needs a title and an abstract given "
                             "as a list of sentences (strings), as the release has")
        if labels is not None and (not isinstance(labels, list) or not all(
                isinstance(x, str) for x in labels)):
            raise InputError(f"{where}: paper {paper}: pred_labels must be a list of "
                             "labels (strings), one per sentence")
        if paper in papers:
            if papers[paper]["record"] != record:
                raise InputError(f"{where}: paper {paper} is given again with other contents "
                                 f"than on line {papers[paper]['line']}: keep one")
            repeated += 1
            continue
        papers[paper] = {"title": title or "", "sentences": sentences, "labels": labels,
                         "line": number, "record": record}
    return papers, repeated


def read_query_metadata(path: Path) -> tuple[dict[str, dict], int]:
    """`<pid>_<facet>` -> the row of queries-release.csv (pid, facet, year, title, paper type),
    and how many rows repeat an earlier one exactly (read once); a query given twice with other
    contents is refused. UTF-8 with or without a byte-order mark (as Excel writes it)."""
    if not path.is_file():
        raise _missing(path)
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            if not reader.fieldnames or not {"pid", "facet"} <= set(reader.fieldnames):
                raise InputError(f"{path}: the header must name the columns pid and facet (the "
                                 "release's: pid,facet,year,title,paper type)")
            rows = [(reader.line_num, row) for row in reader]
    except UnicodeDecodeError:
        raise InputError(f"{path}: {utf8_problem(path)}; is it the release's file?") from None
    except csv.Error as exc:
        raise InputError(f"{path}: unreadable as CSV ({exc}); is it the release's "
                         "file?") from None
    metadata: dict[str, dict] = {}
    lines: dict[str, int] = {}
    repeated = 0
    for line, row in rows:
        query = f"{(row['pid'] or '').strip()}_{(row['facet'] or '').strip()}"
        if query in metadata:
            if metadata[query] != row:
                raise InputError(f"{path}: line {line} gives pid and facet {query} again with "
                                 f"other contents than line {lines[query]}: keep one")
            repeated += 1
            continue
        metadata[query], lines[query] = row, line
    return metadata, repeated


def read_folds(path: Path, queries: dict[str, list[str]]) -> dict[str, str]:
    """`<pid>_<facet>` -> its test fold (`fold1`, `fold2`), checked: per facet, every query is
    in exactly one of fold1_test and fold2_test and the folds name no other query; the "all"
    folds, when given, are the facets' folds together (the official "all" score)."""
    data, _ = _read_json(path)  # a fold named twice alike is the same fold
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected an object {{facet: {{fold: [<pid>_<facet>, ...]}}}}")
    fold_of: dict[str, str] = {}
    for facet, wanted in queries.items():
        folds = data.get(facet)
        if not isinstance(folds, dict) or not all(isinstance(folds.get(f), list)
                                                  for f in TEST_FOLDS):
            raise InputError(f"{path}: facet {facet!r} needs the lists "
                             f"{' and '.join(TEST_FOLDS)} (the official test folds)")
        seen: dict[str, str] = {}
        for fold in TEST_FOLDS:
            for query in folds[fold]:
                if query in seen:
                    raise InputError(f"{path}: {query} is in {seen[query]} and {fold} of "
                                     f"{facet}: each query belongs to one test fold")
                if query not in wanted:
                    raise InputError(f"{path}: {fold} of {facet} names {query}, which "
                                     f"{ANNOTATIONS.format(facet)} has no candidates for")
                seen[query] = fold
        absent = sorted(set(wanted) - set(seen))
        if absent:
            raise InputError(f"{path}: {len(absent)} queries of {ANNOTATIONS.format(facet)} are "
                             f"in no test fold of {facet} (e.g. {absent[0]}): the official "
                             "score averages the folds, so every query needs one")
        fold_of.update({q: f.removesuffix("_test") for q, f in seen.items()})
    everything = data.get("all")
    if isinstance(everything, dict):
        for fold in TEST_FOLDS:
            given = everything.get(fold)
            expected = {q for q, f in fold_of.items() if f == fold.removesuffix("_test")}
            if not isinstance(given, list) or set(given) != expected:
                raise InputError(f"{path}: {fold} of \"all\" is not the facets' {fold} lists "
                                 "together; the \"all\" score needs the same folds")
    return fold_of


def facet_of(label: str) -> str | None:
    """A predicted sentence label (`method_label`) -> its facet (`method`); None for others."""
    return LABEL_FACETS.get(label.removesuffix("_label"))


def kept_sentences(sentences: list[str]) -> list[str]:
    """A paper's sentences as the corpus keeps them: the release's, stripped, empty ones left
    out (prefiltered.parquet's abstract_sentences; sentence i of the multi-vector store is
    kept_sentences(...)[i - 1])."""
    return [s.strip() for s in sentences if s.strip()]


def facet_sentences(sentences: list[str], labels: list[str], facet: str
                    ) -> tuple[str, list[int]]:
    """The facet query of one paper: its facet's sentences joined (the text BM25 and dense
    encoders read) and their numbers in the multi-vector store, which keeps the release's
    split (kept_sentences: its first non-empty sentence is 1)."""
    kept = [(s.strip(), label) for s, label in zip(sentences, labels, strict=True) if s.strip()]
    numbers = [i for i, (_, label) in enumerate(kept, 1) if facet_of(label) == facet]
    return " ".join(kept[i - 1][0] for i in numbers), numbers


def abstract_text(sentences: list[str]) -> str:
    """A paper's abstract as prefiltered.parquet holds it: its kept sentences joined by a
    space."""
    return " ".join(kept_sentences(sentences))


def import_csfcube(src: Path, corpus_dir: Path, replace: bool = False,
                   derived: tuple[Path, ...] = ()) -> dict:
    """Write the CSFCube release at `src` as the corpus `corpus_dir` with its three facet
    pools: a new corpus; the same release again (nothing changes); or, only with `replace`, in
    place of a collection with other contents, whose `derived` indexes and runs are removed
    (`corpus.install.install_corpus`). Everything is read and checked before anything is
    written; a refused input writes nothing."""
    from pipeline.retrieval.bm25.analysis import check_ids

    claim_corpus(corpus_dir, f"make {STAGE}")
    judged, counts, itself = {}, {}, {}
    for facet in FACETS:
        (judged[facet], counts[f"{facet}_repeated_judgments_dropped"],
         counts[f"{facet}_repeated_query_entries_dropped"]) = read_annotations(
            src / ANNOTATIONS.format(facet), facet)
        judged[facet], itself[facet] = leave_out_query_itself(
            judged[facet], src / ANNOTATIONS.format(facet))
        counts[f"{facet}_query_itself_left_out"] = itself[facet].height
    papers, counts["paper_records_repeated"] = read_papers(src / PAPERS)
    metadata, counts["query_rows_repeated"] = read_query_metadata(src / QUERIES)
    queries = {f: judged[f]["query"].unique(maintain_order=True).to_list() for f in FACETS}
    unknown = sorted(q for f in FACETS for q in queries[f] if q not in metadata)
    if unknown:
        raise InputError(f"{src / QUERIES} has no row for {len(unknown)} queries of the "
                         f"annotations (e.g. pid and facet of {unknown[0]}): is it the "
                         "release's file?")
    folds = read_folds(src / SPLITS, queries)
    needed = sorted({*(q.rsplit("_", 1)[0] for f in FACETS for q in queries[f]),
                     *(d for f in FACETS for d in judged[f]["doc"].to_list())})
    absent = [p for p in needed if p not in papers]
    if absent:
        raise InputError(f"{src / PAPERS} has no record of {len(absent)} papers the "
                         f"annotations name (e.g. {absent[0]}): is it the release's file?")
    from pipeline.encoding.multivector import OWN_SPLIT  # torch: once the input is read

    table = pl.DataFrame({"corpusid": needed,
                          "title": [papers[p]["title"] for p in needed],
                          "abstract": [abstract_text(papers[p]["sentences"]) for p in needed],
                          ABSTRACT_SENTENCES: [kept_sentences(papers[p]["sentences"])
                                             for p in needed]},
                         schema={"corpusid": pl.String, "title": pl.String,
                                 "abstract": pl.String, ABSTRACT_SENTENCES: pl.List(pl.String)})
    check_ids(table["corpusid"], "paper")
    counts.update(papers_read=len(papers), papers=table.height,
                  papers_in_no_pool_left_out=len(papers) - table.height)
    built = {f: _facet_pool(src, f, judged[f], papers, metadata, folds, itself[f])
             for f in FACETS}
    # the release's files as read (hashed here, no checksum cache written into SRC)
    read = {name: sha256_file(src / name) for name in
            [*(ANNOTATIONS.format(f) for f in FACETS), PAPERS, QUERIES, SPLITS]}
    parameters = {"source": str(src)}
    with scratch_dir(corpus_dir.parent, corpus_dir.name) as tmp:
        write_parquet(table.to_arrow(), tmp / PREFILTERED)
        made_from = {corpus_label(PREFILTERED): fingerprint(tmp / PREFILTERED)["sha256"]}
        names = []
        for facet in FACETS:
            pool = built[facet]
            name = pool_name(f"{LEVEL}-{facet}", pool["counts"]["candidates"], 0)
            folder = pool_dir(tmp, name)
            frames = (pool["queries"], pool["candidates"], pool["qrels"])
            for file, frame in zip(POOL_FILES, frames, strict=True):
                write_parquet(frame.to_arrow(), folder / file)
            write_json(manifest(STAGE, {**parameters, "facet": facet, "field": facet},
                                name=name, scope=f"{LEVEL}-{facet}", split="test",
                                level=LEVEL, metrics=METRICS, inputs=made_from,
                                outputs=fingerprints(folder, POOL_FILES),
                                counts=pool["counts"],
                                sentence_numbering=OWN_SPLIT),
                       folder / MANIFEST)
            names.append(name)
            counts.update({f"{facet}_{k}": v for k, v in pool["counts"].items()
                           if k in ("queries", "candidates", "qrels")})
        info = {"collection": manifest(STAGE, parameters, outputs=fingerprints(
            tmp, [PREFILTERED]), counts=counts, read=read, pools=names)}
        write_json(info, tmp / MANIFEST)
        info["collection"]["installed"] = install_corpus(tmp, corpus_dir, list(derived),
                                                         replace, "collection")
    for facet in FACETS:
        if itself[facet].height:
            grades = ", ".join(f"{q} (grade {r})" for q, _, r in itself[facet].iter_rows())
            log.warning(f"[{STAGE}] {facet}: {itself[facet].height} query papers listed as their "
                        f"own candidate, left out of their lists and qrels: {grades}")
        missing = built[facet]["counts"]["queries_without_facet_sentences"]
        if missing:
            log.warning(f"[{STAGE}] {missing} {facet} queries have no sentence labelled "
                        f"{facet}: they search with the whole abstract")
    log.info(summary(corpus_dir.name, info["collection"]))
    return info


def summary(corpus: str, info: dict) -> str:
    """What an import of the release kept, per facet, and left out."""
    counts = info["counts"]
    per_facet = ", ".join(f"{f} {counts[f'{f}_queries']} queries / {counts[f'{f}_candidates']} "
                          "candidates" for f in FACETS)
    return (f"[{STAGE}] corpus {corpus} ({info['installed']}), pools "
            f"{', '.join(info['pools'])}: {per_facet}; {counts['papers']} papers "
            f"({counts['papers_in_no_pool_left_out']} records naming no pool's paper left out, "
            f"{counts['paper_records_repeated']} records and {counts['query_rows_repeated']} "
            f"query rows repeated exactly, read once)")


def _facet_pool(src: Path, facet: str, judged: pl.DataFrame, papers: dict[str, dict],
                metadata: dict[str, dict], folds: dict[str, str], itself: pl.DataFrame
                ) -> dict:
    """The queries, candidates and qrels of one facet's pool, and its counts (`itself`: the
    query papers' own judgments, left out of `judged`)."""
    rows, without = [], 0
    for query in judged["query"].unique(maintain_order=True).to_list():
        paper = query.rsplit("_", 1)[0]
        record = papers[paper]
        labels = record["labels"]
        if labels is None or len(labels) != len(record["sentences"]):
            what = ("has no pred_labels" if labels is None else
                    f"has {len(record['sentences'])} sentences but {len(labels)} pred_labels")
            raise InputError(f"{src / PAPERS}:{record['line']}: query paper {paper} {what}: "
                             "its facet sentences cannot be found")
        text, numbers = facet_sentences(record["sentences"], labels, facet)
        if not numbers:  # no sentence of the facet: the whole abstract (counted, warned)
            without += 1
            text = abstract_text(record["sentences"])
            numbers = list(range(1, len(kept_sentences(record["sentences"])) + 1))
        rows.append({"corpusid": query, "field": facet, "title": record["title"],
                     "abstract": text, "paper": paper, "sentences": numbers,
                     "fold": folds[query],
                     "paper_type": (metadata[query].get("paper type") or "").strip()})
    queries = pl.DataFrame(rows, schema={
        "corpusid": pl.String, "field": pl.String, "title": pl.String, "abstract": pl.String,
        "paper": pl.String, "sentences": pl.List(pl.Int16), "fold": pl.String,
        "paper_type": pl.String}).sort("corpusid")
    candidates = judged.select("query", corpusid="doc").sort("query", "corpusid")
    qrels = judged.select("query", "doc", "rel").sort("query", "doc")
    per_query = judged.group_by("query").len()["len"]
    counts = {"queries": queries.height, "candidates": candidates["corpusid"].n_unique(),
              "pairs": candidates.height, "qrels": qrels.height,
              "relevant_grade_2_or_more": qrels.filter(pl.col("rel") >= 2).height,
              "by_grade": {str(g): qrels.filter(pl.col("rel") == g).height for g in GRADES},
              "min_candidates_per_query": int(per_query.min()),
              "max_candidates_per_query": int(per_query.max()),
              "by_fold": dict(queries.group_by("fold").len().sort("fold").iter_rows()),
              "queries_without_facet_sentences": without,
              "query_itself_left_out": itself.height,
              "query_itself_left_out_by_grade": {
                  str(g): itself.filter(pl.col("rel") == g).height for g in GRADES}}
    return {"queries": queries, "candidates": candidates, "qrels": qrels, "counts": counts}
