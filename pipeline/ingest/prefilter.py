"""The MDCR prefilter (docs/ingest.md; MDCR §3), streamed over `papers.parquet`.

Keeps papers with a year, a title, an abstract of at least 30 characters and at least three
citations; counts every drop by its first failed rule and reconciles the counts with ingest.
Papers keep the order of `papers.parquet` (deterministic), so the filter streams row group by
row group and memory does not grow with the corpus.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Literal

import polars as pl

from pipeline.core.atomic import atomic_path
from pipeline.core.checksums import fingerprints, outputs_intact
from pipeline.core.errors import InputError, OptionError
from pipeline.core.inputs import Roots, record
from pipeline.core.locks import file_lock
from pipeline.core.manifests import manifest
from pipeline.corpus.files import PAPERS_SCHEMA, GroupedWriter, corpus_file, row_groups
from pipeline.corpus.manifest import corpus_section, update_corpus_manifest
from pipeline.glossary import CITATION_MODES
from pipeline.layout import MANIFEST, PAPERS, PREFILTERED

log = logging.getLogger(__name__)

CitationMode = Literal["inbound", "outbound", "either"]
DROP_REASONS = ("no_year", "no_title", "short_abstract", "few_citations")

def drop_reason(mode: CitationMode, min_citations: int, min_abstract: int) -> pl.Expr:
    """The first prefilter rule a paper fails (MDCR §3, in the paper's order), or null."""
    cites = {
        "inbound": pl.col("n_inbound"),
        "outbound": pl.col("n_outbound"),
        "either": pl.max_horizontal("n_inbound", "n_outbound"),
    }[mode]
    return (
        pl.when(pl.col("year").is_null()).then(pl.lit("no_year"))
        .when(pl.col("title").fill_null("").str.strip_chars() == "").then(pl.lit("no_title"))
        .when(pl.col("abstract").fill_null("").str.strip_chars().str.len_chars() < min_abstract)
        .then(pl.lit("short_abstract"))
        .when(cites < min_citations).then(pl.lit("few_citations"))
        .otherwise(None)
    )


def reconcile(corpus_dir: Path, counts: dict[str, int]) -> dict[str, Any]:
    """Every raw line accounted for: lines_read (ingest) == kept + drops + quarantined +
    duplicate_records, each term stated; `balanced` is False when the ingest counts are missing
    from `<corpus>/manifest.json`."""
    path = corpus_dir / MANIFEST
    ingested = corpus_section(corpus_dir, "ingest").get("counts", {})
    terms = {key: ingested.get(key) for key in ("lines_read", "quarantined", "duplicate_records")}
    dropped = {reason: counts[reason] for reason in DROP_REASONS}
    missing = [key for key, value in terms.items() if value is None]
    balanced = not missing and terms["lines_read"] == (
        counts["kept"] + sum(dropped.values()) + terms["quarantined"] + terms["duplicate_records"]
    )
    result = {
        "equation": "lines_read == kept + sum(dropped) + quarantined + duplicate_records",
        "lines_read": terms["lines_read"], "kept": counts["kept"], "dropped": dropped,
        "quarantined": terms["quarantined"], "duplicate_records": terms["duplicate_records"],
        "balanced": bool(balanced),
    }
    if missing:
        result["missing"] = f"no ingest counts {', '.join(missing)} in {path}: rerun ingest"
    return result


# what to do when the rule that dropped most is this one (the prefilter kept no paper)
_ADVICE = {
    "no_year": "the papers carry no year: check that the raw folder is the release, whole",
    "no_title": "the papers carry no title: check that the raw folder is the release, whole",
    "short_abstract": "no paper has an abstract of {min_abstract} characters or more: S2AG's "
                      "papers take theirs from the abstracts dataset of the same release, "
                      "which must be downloaded whole (its first files, FIRST=, match few "
                      "papers); S2ORC's metadata must carry them",
    "few_citations": "no paper has {min_citations} citations or more, counted as "
                     "{citations}: count {{CITATIONS=}}, or give a smaller minimum of "
                     "citations",
}


def kept_none(corpus_dir: Path, counts: dict[str, int], parameters: dict[str, Any]
              ) -> OptionError:
    """The one line that refuses a prefilter keeping no paper: every raw line read accounted
    for by its fate (the ingest's counts, then the prefilter's by rule) and what to do about
    the rule that dropped most. A corpus of no paper would only fail later, at make pool,
    blaming the query year."""
    ingested = corpus_section(corpus_dir, "ingest").get("counts", {})
    fates = []
    if (read := ingested.get("lines_read")) is not None:  # S2AG's: its papers dataset's
        fates.append(f"of {read} {'papers ' if 'abstract_lines_read' in ingested else ''}"
                     "lines read")
    if (bad := ingested.get("quarantined")) is not None:
        fates.append(f"{bad} quarantined")
    if (copies := ingested.get("duplicate_records")) is not None:
        fates.append(f"{copies} duplicate record{'' if copies == 1 else 's'}")
    dropped = {reason: counts[reason] for reason in DROP_REASONS if counts[reason]}
    fates.append(f"{sum(dropped.values())} papers dropped" + (
        f" ({', '.join(f'{n} {reason}' for reason, n in dropped.items())})" if dropped else ""))
    worst = max(dropped, key=dropped.__getitem__) if dropped else None
    advice = (_ADVICE[worst].format(min_abstract=parameters["min_abstract_chars"],
                                    min_citations=parameters["min_citations"],
                                    citations=parameters["citations"])
              if worst else "the ingest kept no paper: ingest the release again")
    other = next(mode for mode in ("either", "inbound") if mode != parameters["citations"])
    name = corpus_dir.name.replace("{", "{{").replace("}", "}}")  # a template
    return OptionError(f"no paper of corpus {name} passes the prefilter: "
                       f"{', '.join(fates)}: {advice}; nothing was written",
                       {"CITATIONS": other})


def prefilter(corpus_dir: Path, mode: CitationMode = "inbound", min_citations: int = 3,
              min_abstract: int = 30) -> dict:
    """Prefilter under the corpus's lock (so a manifest never describes another run's file)."""
    if not corpus_dir.is_dir():
        raise InputError(f"{corpus_dir} does not exist: run the ingest stage first")
    with file_lock(corpus_dir):  # one corpus stage at a time
        return _prefilter(corpus_dir, mode, min_citations, min_abstract)


def _prefilter(corpus_dir: Path, mode: CitationMode, min_citations: int,
               min_abstract: int) -> dict:
    """Write `prefiltered.parquet` and record drop counts by reason in the corpus manifest,
    reconciled with the ingest counts (docs/ingest.md: every dropped paper counted by reason)."""
    if mode not in CITATION_MODES:
        raise InputError(f"unknown citation mode {mode!r}: use one of {', '.join(CITATION_MODES)}")
    papers_path = corpus_file(corpus_dir, PAPERS)  # checked against its manifest
    parameters = {"citations": mode, "min_citations": min_citations,
                  "min_abstract_chars": min_abstract}
    inputs = record(Roots.of(corpus_dir), [papers_path])
    old = corpus_section(corpus_dir, "prefilter")
    if (old.get("parameters") == parameters and old.get("inputs") == inputs
            and outputs_intact(corpus_dir, old)):
        log.info("[prefilter] up to date")
        return old
    start = time.perf_counter()
    reason = drop_reason(mode, min_citations, min_abstract)
    counts = dict.fromkeys((*DROP_REASONS, "kept"), 0)
    with (atomic_path(corpus_dir / PREFILTERED) as tmp,
          GroupedWriter(tmp, PAPERS_SCHEMA) as writer):
        for table in row_groups(papers_path):
            tagged = pl.from_arrow(table).with_columns(reason=reason)
            for row in tagged.group_by("reason").len().iter_rows(named=True):
                counts[row["reason"] or "kept"] += row["len"]
            writer.write(tagged.filter(pl.col("reason").is_null()).drop("reason").to_arrow())
        if not counts["kept"]:  # refused before the file is replaced: the corpus as it was
            raise kept_none(corpus_dir, counts, parameters)
        update_corpus_manifest(corpus_dir, "prefilter", None)  # the file is being replaced
    counts.setdefault("kept", 0)
    counts["total"] = sum(counts[r] for r in DROP_REASONS) + counts["kept"]
    info = manifest(
        "prefilter", parameters, counts=counts, reconciliation=reconcile(corpus_dir, counts),
        inputs=inputs, outputs=fingerprints(corpus_dir, [PREFILTERED]),
        seconds=round(time.perf_counter() - start, 2),
    )
    update_corpus_manifest(corpus_dir, "prefilter", info)
    return info
