"""The report's opening summary (issue 79): a few sentences, each derived from the tables below
them, quoting their cells: which model is best per setting (the differences table), where the
curves cross (the crossover table), how many queries a difference needs (the queries-needed
table) and what the report leaves out (the not-shown section). A sentence says nothing its
table's test does not: "best" only where every interval of the leader's differences lies
above 0, else "not distinguishable". Rules in full: docs/evaluation.md, The summary."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import polars as pl

from pipeline.core.logs import counted
from pipeline.evaluation.crossover import HEADER as CROSSOVER_HEADER
from pipeline.evaluation.crossover import at_floor
from pipeline.evaluation.evaluate import NOT_SCORED
from pipeline.evaluation.variance import UPPER_LEVEL, differences, separated
from pipeline.layout import format_size
from pipeline.report.tables import main_metric, markdown_text, metric_key, metric_name
from pipeline.report.variance import ALPHA, FLOORS, POWER, REACH, variance_rows

log = logging.getLogger(__name__)

MAX_SENTENCES = 8
MAX_LISTED = 3  # settings (or runs) a clause names one by one; beyond, the extremes (a count)
DIFFERENCES, CROSSOVER, QUERIES = "variance-differences", "crossover", "queries-needed"
LEFT_OUT, OTHER_DEPTHS = "left-out", "other-depths"
# the differences table's columns the summary reads (pipeline/report/variance.py)
POOLS, A, B, DIFFERENCE = "pools", "a", "b", "difference"
BOTH, QUERIES_ONLY = "95% queries and draws", "95% queries only"
INTERVAL_WORDS = {BOTH: "95% intervals over queries and pool draws",
                  QUERIES_ONLY: "95% intervals over queries, the paired t-test's, from one pool "
                                "draw"}
# the settings in the summary's order, and how a sentence names each level's pools
LEVELS = {"dataset": "dataset-level pools", "field": "field-level pools",
          "collection": "the collection's pools",
          "mdcr": "MDCR-style pools over every list of the benchmark",
          "csfcube": "CSFCube's facet pools by plain means over queries"}
_INTERVAL = re.compile(r"^\[(-?\d+(?:\.\d+)?), (-?\d+(?:\.\d+)?)\]$")
_NUMBER = re.compile(r"^\d[\d,]*")
_REACH = re.compile(rf"^{re.escape(REACH)}(\d+)$")  # "R≥9": not reachable, 9 draws reach it


class TableLike(Protocol):
    name: str
    header: list[str]
    rows: list[list[str]]


class ResultsLike(Protocol):
    """What the summary reads of the report's `build.Results`: the rows its tests compare and
    the depth they were cut at (`top`: its words)."""

    compared: pl.DataFrame
    depth: str | None
    top: str


class SectionLike(Protocol):
    name: str
    tables: tuple[TableLike, ...]


@dataclass(frozen=True)
class Quote:
    """One table cell a sentence writes: the table, its row (index) and column (header), and
    the text written, which is the cell itself (`how` "cell"), its negation where the sentence
    reads the pair b - a ("negated"), its leading number ("first": `first_number`) or one of
    its clauses ("part": an outcome's clause, between "; ") or the fewest draws a "not
    reachable" names ("reach": `reach_draws`)."""

    table: str
    row: int
    column: str
    text: str
    how: str = "cell"


@dataclass(frozen=True)
class Sentence:
    """A sentence of the summary: its kind (best, crossing, queries, left-out), the tables it
    is derived from (by name) and the cells it quotes."""

    kind: str
    sources: tuple[str, ...]
    text: str
    quotes: tuple[Quote, ...] = ()


def negated(text: str) -> str:
    """A printed number or interval ("3.6", "[1.5, 5.6]") of a - b as b - a ("-3.6",
    "[-5.6, -1.5]"): the same digits, the sign turned."""
    if found := _INTERVAL.match(text):
        low, high = found.groups()
        return f"[{negated(high)}, {negated(low)}]"
    if text.startswith("-"):
        return text[1:]
    return text if float(text) == 0 else f"-{text}"


def first_number(cell: str) -> str:
    """A queries-needed cell's planning number (its leading number, "825" of "825 (468)"), or
    the cell where it has none ("R≥9")."""
    found = _NUMBER.match(cell)
    return found.group(0) if found else cell


def reach_draws(cell: str) -> str | None:
    """The fewest draws a queries-needed cell names where its row's R cannot reach the power
    ("9" of "R≥9"), None where it names none."""
    found = _REACH.match(cell)
    return found.group(1) if found else None


def _listed(words: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _table(sections: Sequence[SectionLike], name: str) -> TableLike | None:
    return next((t for s in sections for t in s.tables if t.name == name), None)


@dataclass(frozen=True)
class _Pair:
    """The leader's difference with another model in one setting, as the sentence reads it
    (leader - other), and its row as the table prints it (`printed`: a - b)."""

    other: str
    difference: Quote
    interval: Quote | None  # None: the row has no interval (too few queries): `missing`
    missing: str = ""
    apart: bool | None = None  # the pair's test (`variance.separated`); None: no interval

    def printed(self, leader: str) -> tuple[str, str, _Pair]:
        """a, b and the pair as the table's row reads it (a - b, its cells as printed)."""
        if self.difference.how == "cell":
            return leader, self.other, self
        cells = [None if q is None else Quote(q.table, q.row, q.column, negated(q.text))
                 for q in (self.difference, self.interval)]
        return self.other, leader, _Pair(leader, cells[0], cells[1], self.missing, self.apart)


@dataclass(frozen=True)
class _Lead:
    """One setting (a pools cell) of the differences table: its leader (the model whose
    difference with every other is above 0), the verdict (best, tied, untested; none: no
    model is above every other) and its pairs, nearest first."""

    pools: str
    verdict: str
    leader: str = ""
    pairs: tuple[_Pair, ...] = ()
    column: str = ""

    @property
    def tied(self) -> tuple[_Pair, ...]:
        return tuple(p for p in self.pairs if p.apart is False)

    @property
    def key(self) -> tuple:
        """What the settings of one clause share: the verdict, and the leader and its nearest
        model, or the pairs whose intervals hold 0 (as the table prints them)."""
        if self.verdict == "tied":
            return ("tied", tuple(sorted(p.printed(self.leader)[:2] for p in self.tied)),
                    self.column)
        return (self.verdict, self.leader, self.pairs[0].other if self.pairs else "",
                len(self.pairs), self.column)


def _lead(table: TableLike, pools: str, indices: list[int],
          apart: dict[tuple[str, str, str], bool | None]) -> _Lead:
    """The setting `pools` of the differences table (its rows `indices`), each pair's verdict
    from `apart` ((pools, a, b) -> `variance.separated`, on the unrounded interval: the test
    the main tables' † asks too)."""
    h = table.header
    col = {name: h.index(name) for name in (A, B, DIFFERENCE, BOTH, QUERIES_ONLY)}
    rows = [(i, table.rows[i]) for i in indices]
    models = sorted({r[col[A]] for _, r in rows} | {r[col[B]] for _, r in rows})

    def oriented(model: str, other: str) -> _Pair | None:
        for i, row in rows:
            if {row[col[A]], row[col[B]]} != {model, other}:
                continue
            how = "cell" if row[col[A]] == model else "negated"
            kind = BOTH if row[col[BOTH]].startswith("[") else QUERIES_ONLY
            text = row[col[DIFFERENCE]]
            difference = Quote(DIFFERENCES, i, DIFFERENCE,
                               text if how == "cell" else negated(text), how)
            cell = row[col[kind]]
            if not _INTERVAL.match(cell):
                return _Pair(other, difference, None, cell)
            interval = Quote(DIFFERENCES, i, kind, cell if how == "cell" else negated(cell), how)
            return _Pair(other, difference, interval, apart=apart.get((pools, row[col[A]],
                                                                       row[col[B]])))
        return None

    for model in models:
        pairs = [oriented(model, other) for other in models if other != model]
        if any(p is None or float(p.difference.text) <= 0 for p in pairs):
            continue
        pairs.sort(key=lambda p: (float(p.difference.text), p.other))
        columns = {p.interval.column for p in pairs if p.interval is not None}
        column = columns.pop() if len(columns) == 1 else ""
        if all(p.apart for p in pairs):
            verdict = "best"
        elif any(p.apart is False for p in pairs):
            verdict = "tied"
        else:
            verdict = "untested"
        return _Lead(pools, verdict, model, tuple(pairs), column)
    return _Lead(pools, "none")


def _setting_levels(data: ResultsLike) -> dict[str, str]:
    """pools cell ("all-10k", as the variance tables write it) -> the level of its pools."""
    return {pools: level for pools, (level, _, _) in _settings(data).items()}


def _settings(data: ResultsLike) -> dict[str, tuple[str, str, int]]:
    """pools cell ("all-10k", as the variance tables write it) -> level, scope, size."""
    keys = data.compared.select("level", "scope", "size").unique().sort("level", "scope", "size")
    return {f"{scope}-{format_size(size)}": (level, scope, size)
            for level, scope, size in keys.rows()}


def _numbers(pairs: list[_Pair], settings: list[str]) -> tuple[str, list[Quote]]:
    """"3.6 [1.5, 5.6] on all-2k and 5.1 [2.5, 7.6] on all-5k" (one setting: "3.6 [1.5,
    5.6]"): each setting's difference and interval (beyond MAX_LISTED settings: the least and
    the greatest difference)."""
    shown = list(zip(pairs, settings, strict=True))
    if len(shown) > MAX_LISTED:
        ordered = sorted(shown, key=lambda s: float(s[0].difference.text))
        shown = [ordered[0], ordered[-1]]
    words, quotes = [], []
    for pair, setting in shown:
        interval = pair.interval.text if pair.interval else f"(no interval: {pair.missing})"
        where = f" on {setting}" if len(settings) > 1 else ""
        words.append(f"{pair.difference.text} {interval}{where}")
        quotes += [pair.difference, *([pair.interval] if pair.interval else [])]
    joined = (f"from {words[0]} to {words[1]}" if len(settings) > MAX_LISTED
              else _listed(words))
    return joined, quotes


def _where(settings: list[str]) -> str:
    if len(settings) > MAX_LISTED:
        return f"{len(settings)} pools ({settings[0]} to {settings[-1]})"
    return _listed(settings)


def _clause(leads: list[_Lead], with_column: bool) -> tuple[str, list[Quote]]:
    """One clause for the settings of one `_Lead.key`."""
    first = leads[0]
    settings = [lead.pools for lead in leads]
    kind = f" ({INTERVAL_WORDS[first.column]})" if with_column and first.column else ""
    if first.verdict == "none":
        return f"no model's mean is above every other's on {_where(settings)}", []
    if first.verdict == "best":
        runner = first.pairs[0].other
        numbers, quotes = _numbers([lead.pairs[0] for lead in leads], settings)
        if len(first.pairs) == 1:
            return (f"{first.leader} is best on {_where(settings)}, ahead of {runner} by "
                    f"{numbers}{kind}"), quotes
        return (f"{first.leader} is best on {_where(settings)}, ahead of the next model, "
                f"{runner}, by {numbers}{kind}, each of its intervals with the other models "
                "above 0", quotes)
    if first.verdict == "tied":
        parts, quotes, names = [], [], []
        for a, b in first.key[1]:
            found = []
            for lead in leads:
                for pair in lead.tied:
                    x, y, shown = pair.printed(lead.leader)
                    if (x, y) == (a, b):
                        found.append(shown)
            numbers, quoted = _numbers(found, settings)
            parts.append(f"{a} - {b} {numbers}")
            quotes += quoted
            names += [n for n in (a, b) if n not in names]
        holds = "its interval holds" if len(quotes) == 2 else "each interval holds"
        return (f"{_listed(names)} are not distinguishable on {_where(settings)} "
                f"({'; '.join(parts)}{kind}: {holds} 0)", quotes)
    runner = first.pairs[0]
    numbers, quotes = _numbers([lead.pairs[0] for lead in leads], settings)
    return (f"{first.leader} has the highest mean on {_where(settings)}, untested: ahead of "
            f"{runner.other} by {numbers}", quotes)


def best_sentences(data: ResultsLike, sections: Sequence[SectionLike]) -> list[Sentence]:
    """Per level of pools present (LEVELS' order), which model is best on its pools and by how
    much, from the differences table: one sentence per level, one clause per `_Lead.key` (the
    settings of one verdict, leader and nearest model), in the table's order."""
    table = _table(sections, DIFFERENCES)
    if table is None:
        return []
    levels = _setting_levels(data)
    by_pools: dict[str, list[int]] = {}
    for i, row in enumerate(table.rows):
        by_pools.setdefault(row[table.header.index(POOLS)], []).append(i)
    metric, apart = _metric(data), _apart(data)
    out = []
    for level in sorted({levels.get(p, "") for p in by_pools} - {""},
                        key=lambda v: (list(LEVELS).index(v) if v in LEVELS else len(LEVELS), v)):
        leads = [_lead(table, pools, rows, apart) for pools, rows in by_pools.items()
                 if levels.get(pools) == level]
        groups: dict[tuple, list[_Lead]] = {}
        for lead in leads:
            groups.setdefault(lead.key, []).append(lead)
        columns = {lead.column for lead in leads if lead.column}
        uniform = len(columns) == 1
        clauses, quotes = [], []
        for group in groups.values():
            clause, found = _clause(group, not uniform)
            clauses.append(clause)
            quotes += found
        words = LEVELS.get(level, f"{level} pools")
        test = f"; a - b with {INTERVAL_WORDS[columns.pop()]}" if uniform else ""
        out.append(Sentence("best", (DIFFERENCES,), f"On {words} ({metric} x100{test}): "
                            + "; ".join(clauses) + ".", tuple(quotes)))
    return out


def _apart(data: ResultsLike) -> dict[tuple[str, str, str], bool | None]:
    """(pools, a, b) -> whether the differences table's pair is told apart
    (`variance.separated`), on the rows the table is made from (`variance_rows`)."""
    _, rows = variance_rows(data.compared)
    return {(f"{r['scope']}-{format_size(r['size'])}", r["a"], r["b"]): separated(r)
            for r in differences(rows).iter_rows(named=True)}


def _metric(data: ResultsLike) -> str:
    """The variance section's metric, in the report's words (its tables' `main_metric`)."""
    scored = data.compared.filter(pl.col("value").is_not_null())
    found = main_metric(sorted(scored["metric"].unique().to_list(), key=metric_key))
    return metric_name(found) if found else ""


def crossing_sentence(data: ResultsLike, sections: Sequence[SectionLike]) -> list[Sentence]:
    """Where each pair's curves against pool size cross, from the crossover table: the pairs
    with no model at its floor, each row's outcome (its clauses but those on extrapolation)
    and, where a crossing is given, the crossing and its interval; beyond MAX_LISTED rows,
    the rows with a crossing and a count of the rest."""
    table = _table(sections, CROSSOVER)
    if table is None:
        return []
    pools, pair, _, _, _, crossing, interval, _, outcome = CROSSOVER_HEADER
    col = {name: table.header.index(name) for name in (pools, pair, crossing, interval, outcome)}
    parts, quotes, rest = [], [], 0
    rows = [(i, r) for i, r in enumerate(table.rows)
            if not any(at_floor(m) or m in FLOORS for m in r[col[pair]].split(" - "))]
    for i, row in rows:
        if len(rows) > MAX_LISTED and row[col[crossing]] == "-":
            rest += 1
            continue
        said = [c for c in row[col[outcome]].split("; ")
                if not c.startswith(("none extrapolated", "extrapolated:"))]
        found = [Quote(CROSSOVER, i, pair, row[col[pair]]),
                 Quote(CROSSOVER, i, pools, row[col[pools]]),
                 *(Quote(CROSSOVER, i, outcome, c, "part") for c in said)]
        if row[col[crossing]] != "-":
            cell = row[col[interval]]
            if "crosses at" in said[0]:
                said.insert(1, f"95% interval {cell}" + (" candidates" if cell.startswith("[")
                                                         else ""))
                found.append(Quote(CROSSOVER, i, interval, cell))
            else:
                said.insert(1, f"the lines extrapolated meet at {row[col[crossing]]} candidates "
                               "(no interval)")
                found.append(Quote(CROSSOVER, i, crossing, row[col[crossing]]))
        parts.append(f"{row[col[pair]]} ({row[col[pools]]}): {', '.join(said)}")
        quotes += found
    if rest:
        parts.append(f"the other {rest} pairs: no crossing given")
    if not parts:
        return []
    metric = _metric(data)
    return [Sentence("crossing", (CROSSOVER,), f"Where the {metric} curves against pool size "
                     "cross (pair a - b, pools): " + "; ".join(parts) + ".", tuple(quotes))]


def queries_sentence(data: ResultsLike, sections: Sequence[SectionLike]) -> list[Sentence]:
    """How many queries each stated difference needs, from the queries-needed table (a row
    per pair and R, a column per delta): the first pair of the dataset-level pools (else the
    table's first), with the draws measured (or the fewest the table plans beyond one, where
    it was not planned), each delta; where R draws cannot reach the power, the fewest that
    can."""
    table = _table(sections, QUERIES)
    if table is None or not table.rows:
        return []
    h = table.header
    if "R" not in h:
        log.warning("[summary] the queries-needed table has no R column: no sentence")
        return []
    deltas = [name for name in h if re.fullmatch(r"\d+(\.\d+)?", name)]
    levels = _setting_levels(data)
    keys = [(r[h.index(POOLS)], r[h.index(A)], r[h.index(B)]) for r in table.rows]
    key = next((k for k in keys if levels.get(k[0]) == "dataset"), keys[0])
    planned_rows = {int(table.rows[i][h.index("R")]): i for i, k in enumerate(keys) if k == key}
    measured = _measured_draws(data, key[0])
    planned = measured if measured in planned_rows else min(
        (d for d in planned_rows if d >= 2), default=1) if measured > 1 else 1
    if planned not in planned_rows:
        return []
    i = planned_rows[planned]
    row = table.rows[i]
    quotes = [Quote(QUERIES, i, POOLS, key[0]), Quote(QUERIES, i, A, key[1]),
              Quote(QUERIES, i, B, key[2]), Quote(QUERIES, i, "R", str(planned))]
    numbers, reach, others = [], [], {}
    for delta in deltas:
        cell = row[h.index(delta)]
        if (count := first_number(cell))[:1].isdigit() or count.startswith(">"):
            quotes.append(Quote(QUERIES, i, delta, count, "first"))
            numbers.append(f"{count} queries for {delta}")
        elif (more := reach_draws(cell)) is not None:
            quotes.append(Quote(QUERIES, i, delta, more, "reach"))
            reach.append((delta, more))
        else:
            quotes.append(Quote(QUERIES, i, delta, cell))
            others.setdefault(cell, []).append(delta)
    said = [*([f"the report's test needs {_listed(numbers)}"] if numbers else []),
            *([f"for {_listed([d for d, _ in reach])} it is not reachable with {planned} "
               f"draws ({_listed([m for _, m in reach])} draws reach it)"] if reach else []),
            *(f'the table says "{cell}" for {_listed(found)}' for cell, found in others.items())]
    condition = (f"power {POWER} with {counted(planned, 'pool draw')}, planned at the draw "
                 f"variance's {UPPER_LEVEL * 100:g}% upper bound" if planned > 1
                 else f"power {POWER} with 1 pool draw, the paired t-test at the estimates")
    return [Sentence("queries", (QUERIES,), (
        f"To tell {key[1]} from {key[2]} on {key[0]} by a difference of "
        f"{_listed(deltas).replace(' and ', ' or ')} in {_metric(data)} x100 (alpha {ALPHA}, "
        f"{condition}), {'; '.join(said)}."), tuple(quotes))]


def _measured_draws(data: ResultsLike, pools: str) -> int:
    """The pool draws (repeats) measured on `pools` (a pools cell)."""
    if pools not in (settings := _settings(data)):
        return 1
    _, scope, size = settings[pools]
    found = data.compared.filter(pl.col("scope") == scope, pl.col("size") == size)
    return max(found["repeat"].n_unique(), 1)


def left_out_sentence(data: ResultsLike, sections: Sequence[SectionLike]) -> list[Sentence]:
    """What the report leaves out and why, from the not-shown section's tables: evaluations
    not current, runs not scored (evaluate.NOT_SCORED), runs of another depth; else that none
    was."""
    stale, other = _table(sections, LEFT_OUT), _table(sections, OTHER_DEPTHS)
    parts, quotes, sources = [], [], []
    for table, kept, words in (
            (stale, lambda row: row[1] != NOT_SCORED, (
                "evaluation", "evaluations", "left out as not current (made from weights, "
                "inputs or options other than those now; no number comes from them)")),
            (stale, lambda row: row[1] == NOT_SCORED, (
                "run", "runs", "left out as not scored (no evaluation was written)")),
            (other, lambda row: True, ("run", "runs", f"of another depth than the report's "
                                       f"{data.top}, shown under a label with its depth and "
                                       "compared with no other model"))):
        rows = [(i, row) for i, row in enumerate(table.rows if table is not None else ())
                if kept(row)]
        if not rows:
            continue
        names = [row[0] for _, row in rows]
        shown = names[:MAX_LISTED]
        more = f" and {len(names) - len(shown)} more" if len(names) > len(shown) else ""
        noun = words[0] if len(names) == 1 else words[1]
        parts.append(f"{len(names)} {noun} {words[2]}: {', '.join(shown)}{more}")
        quotes += [Quote(table.name, i, table.header[0], row[0])
                   for i, row in rows[:MAX_LISTED]]
        sources += [table.name] if table.name not in sources else []
    if not parts:
        depth = f" ({data.top})" if data.depth is not None else ""
        return [Sentence("left-out", ("not-shown",), (
            "No evaluation was left out as not current, and no run is of another depth than "
            f"the report's{depth}."))]
    return [Sentence("left-out", tuple(sources), "Left out: " + "; ".join(parts) + ".",
                     tuple(quotes))]


def summary_sentences(data: ResultsLike, sections: Sequence[SectionLike]) -> list[Sentence]:
    """The summary's sentences, at most MAX_SENTENCES: best per level, where the curves
    cross, the queries needed, what was left out (the last three kept where the first are
    too many)."""
    tail = [*crossing_sentence(data, sections), *queries_sentence(data, sections),
            *left_out_sentence(data, sections)]
    best = best_sentences(data, sections)
    if len(best) + len(tail) > MAX_SENTENCES:
        log.warning(f"[summary] {len(best)} levels of pools: the summary names the first "
                    f"{MAX_SENTENCES - len(tail)}")
        best = best[:MAX_SENTENCES - len(tail)]
    return [*best, *tail]


def summary_text(sentences: Sequence[Sentence]) -> str:
    """The summary as the report's Markdown: a heading and a list, one finding a line."""
    return "## Summary\n\n" + "".join(f"- {markdown_text(s.text)}\n" for s in sentences)
