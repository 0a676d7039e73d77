"""A deterministic generator of corpora in the S2ORC 2020 metadata format (docs/ingest.md).

The embedded default corpus is made here, so the demo exercises the same ingest code as the
real S2ORC. What makes retrieval on it meaningful:

- each paper has a primary MAG field (skewed sizes, Medicine largest), a subtopic (6 per
  field) and a *theme* (30 per subtopic: six words of the subtopic and two borrowed from other
  fields, so fields share words); some papers carry 0, 2 or 3 fields. Themes are fine
  enough that a field-level pool is about as hard as a dataset-level pool of the same size,
  as in MDCR §3 (calibration: benchmarks/results/calibration.md);
- titles and abstracts are English sentences whose content words come from the paper's theme,
  subtopic and field word lists (`data/synthetic_words.json`) and from its own three keywords
  (field words); a paper's text also echoes the keywords of up to twenty papers it cites, so
  BM25 and a pretrained encoder both see overlap between a paper and what it cites;
- citations point to older papers, preferring the same theme, then subtopic, then field, and
  papers that are popular (a heavy-tailed fitness) and recent. Inbound lists are the exact
  transpose of the in-corpus outbound lists; a few outbound ids are absent from the corpus,
  as in S2ORC.

Scaling: papers are laid out in chronological order with O(N) small numeric arrays (about 112
bytes per paper, benchmarks/results/synthetic_scale.md); citations are sampled block by block
and spilled to disk by cited block; text and JSON are then rendered block by block, by worker
processes. Memory is bounded by the block size plus the layout, and the output depends only on
the seed, size and block size: not on the number of shards or workers.
"""

from __future__ import annotations

import bisect
import contextlib
import gzip
import itertools
import json
import logging
import random
from dataclasses import asdict, dataclass, replace
from importlib import resources
from pathlib import Path

import numpy as np
import orjson

from pipeline.core.atomic import atomic_dir, scratch_dir
from pipeline.core.checksums import fingerprints
from pipeline.core.current import stale
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.logs import track
from pipeline.core.manifests import manifest
from pipeline.core.processes import worker_pool
from pipeline.fields import MAG_FIELDS
from pipeline.layout import (
    MANIFEST,
    MAX_SYNTHETIC_SHARDS,
    SYNTHETIC_SHARD,
    SYNTHETIC_WORDS,
    array_file,
)

# Share of papers whose primary field is this one (Medicine largest, as in MAG/S2ORC).
FIELD_SHARE: dict[str, float] = {
    "Medicine": 0.24, "Biology": 0.12, "Computer Science": 0.09, "Chemistry": 0.08,
    "Physics": 0.07, "Engineering": 0.06, "Materials Science": 0.05, "Psychology": 0.05,
    "Mathematics": 0.04, "Environmental Science": 0.03, "Economics": 0.03, "Business": 0.025,
    "Political Science": 0.02, "Sociology": 0.02, "Geology": 0.02, "Geography": 0.015,
    "History": 0.01, "Art": 0.008, "Philosophy": 0.007,
}
N_FIELDS_P = (0.05, 0.876, 0.07, 0.004)  # 0, 1, 2 or 3 fields (docs/ingest.md)
LEVEL_P = (0.5, 0.2, 0.15, 0.15)  # a reference goes to: same theme, subtopic, field, anywhere
DANGLING_P = 0.03  # share of outbound ids that are not in the corpus
ABSTRACT_P = 0.52  # share of papers with an abstract
SHORT_ABSTRACT_P = 0.03  # of those, share shorter than 30 characters
NULL_YEAR_P = 0.01
EMPTY_TITLE_P = 0.005
ID_OFFSET = 1_000_000
KEYWORDS = 3  # words that are a paper's own focus
KEYWORD_SOURCES = 20  # cited papers whose keywords a paper's text echoes, at most

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SyntheticConfig:
    n_papers: int = 120_000
    n_shards: int = 4
    seed: int = 0
    first_year: int = 1960
    last_year: int = 2020
    growth: float = 0.06  # yearly growth of the number of papers
    recency_half_life: float = 4.0  # years; citations prefer recent papers
    themes_per_subtopic: int = 30
    theme_words: int = 8
    theme_borrowed: int = 2  # of the theme words, those borrowed from other fields
    block_size: int = 50_000


def load_words() -> dict:
    """The per-field and per-subtopic word lists shipped with the package."""
    text = resources.files("pipeline").joinpath(SYNTHETIC_WORDS).read_text()
    return json.loads(text)["fields"]


# ---------------------------------------------------------------------------------------------
# Layout: who is who, in chronological order
# ---------------------------------------------------------------------------------------------


@dataclass
class _Level:
    """Papers grouped at one level (theme, subtopic, field or all), chronological inside a
    group, with cumulative citation weights for sampling an older paper of the same group."""

    group: np.ndarray  # group id of each paper
    order: np.ndarray  # paper indices sorted by (group, index)
    start: np.ndarray  # first position of each group in `order`
    rank: np.ndarray  # position of each paper inside its group
    cum: np.ndarray  # cum[k] = sum of weights of order[:k]

    @classmethod
    def build(cls, group: np.ndarray, weight: np.ndarray, n_groups: int) -> _Level:
        order = np.argsort(group, kind="stable").astype(np.int32)
        counts = np.bincount(group, minlength=n_groups)
        start = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        rank = np.empty(len(group), dtype=np.int32)
        rank[order] = np.arange(len(group)) - start[group[order]]
        cum = np.concatenate([[0.0], np.cumsum(weight[order])])
        return cls(group, order, start, rank, cum)

    def sample_older(self, citing: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """For each citing paper, an older paper of its group drawn by weight; -1 if none."""
        lo = self.start[self.group[citing]]
        hi = lo + self.rank[citing]
        u = self.cum[lo] + rng.random(len(citing)) * (self.cum[hi] - self.cum[lo])
        pos = np.clip(np.searchsorted(self.cum, u, side="right") - 1, lo, np.maximum(hi - 1, lo))
        return np.where(hi > lo, self.order[pos], -1)


class _Layout:
    """Year, field, subtopic, theme, popularity and reference count of every paper."""

    def __init__(self, cfg: SyntheticConfig, n_subtopics: int, n_field_words: int):
        rng = np.random.default_rng([cfg.seed, 0])
        n = cfg.n_papers
        years = np.arange(cfg.first_year, cfg.last_year + 1)
        share = np.exp(cfg.growth * (years - cfg.first_year))
        share[-1] *= 0.5  # the 2020 release holds only part of its last year
        self.year = np.sort(rng.choice(years, size=n, p=share / share.sum())).astype(np.int16)
        field_p = np.array([FIELD_SHARE[f] for f in MAG_FIELDS])
        self.field = rng.choice(len(MAG_FIELDS), size=n, p=field_p / field_p.sum()).astype(
            np.int32)
        self.subtopic = self.field * n_subtopics + rng.integers(
            0, n_subtopics, size=n, dtype=np.int32)
        self.theme = self.subtopic * cfg.themes_per_subtopic + rng.integers(
            0, cfg.themes_per_subtopic, size=n, dtype=np.int32)
        fitness = rng.lognormal(0.0, 1.1, size=n)
        recency = np.log(2) / cfg.recency_half_life
        # weight ∝ fitness · exp(-λ·age): the citing year's factor cancels when normalising
        weight = fitness * np.exp(recency * (self.year - cfg.first_year))
        span = max(2019 - cfg.first_year, 1)
        mean_refs = 4 + 66 * np.clip((self.year - cfg.first_year) / span, 0, 1) ** 2
        self.n_refs = np.minimum(rng.poisson(mean_refs), 150).astype(np.int16)
        n_themes = len(MAG_FIELDS) * n_subtopics * cfg.themes_per_subtopic
        self.levels = [
            _Level.build(self.theme, weight, n_themes),
            _Level.build(self.subtopic, weight, len(MAG_FIELDS) * n_subtopics),
            _Level.build(self.field, weight, len(MAG_FIELDS)),
            _Level.build(np.zeros(n, dtype=np.int32), weight, 1),
        ]
        self.id_modulus = _next_prime(4 * n + 1)
        self.id_step = int(rng.integers(self.id_modulus // 3, self.id_modulus - 1))
        # each paper's own focus: KEYWORDS words of its field's word list, echoed by citers
        self.keywords = rng.integers(0, n_field_words, size=(n, KEYWORDS), dtype=np.int16)

    def paper_id(self, index: np.ndarray) -> np.ndarray:
        """A bijection from chronological index to a CorpusID-like id (not chronological)."""
        return ID_OFFSET + (index.astype(np.int64) * self.id_step + 7) % self.id_modulus

    def dangling_id(self, code: np.ndarray) -> np.ndarray:
        """Ids above the corpus id range: cited by the corpus but not in it."""
        return ID_OFFSET + self.id_modulus + code


def _next_prime(n: int) -> int:
    def is_prime(k: int) -> bool:
        return k > 1 and all(k % d for d in range(2, int(k**0.5) + 1))

    while not is_prime(n):
        n += 1
    return n


# ---------------------------------------------------------------------------------------------
# Citations: sampled block by block, spilled to disk by the block of the cited paper
# ---------------------------------------------------------------------------------------------


def _sample_block_citations(
    layout: _Layout, cfg: SyntheticConfig, block: int
) -> tuple[np.ndarray, np.ndarray]:
    """Outbound references of the papers in one chronological block, deduplicated.

    Returns (citing index, target) sorted by citing; target < N is a corpus paper index,
    target >= N encodes a dangling id (target - N).
    """
    n = cfg.n_papers
    rng = np.random.default_rng([cfg.seed, 1, block])
    lo, hi = block * cfg.block_size, min((block + 1) * cfg.block_size, n)
    citing = np.repeat(np.arange(lo, hi), layout.n_refs[lo:hi])
    level = rng.choice(len(LEVEL_P), size=len(citing), p=LEVEL_P)
    target = np.full(len(citing), -1, dtype=np.int64)
    for k, lvl in enumerate(layout.levels):
        mask = level == k
        target[mask] = lvl.sample_older(citing[mask], rng)
    dangling = rng.random(len(citing)) < DANGLING_P
    target[dangling] = n + rng.integers(0, 5 * n, size=int(dangling.sum()))
    keep = target >= 0
    key = np.unique(citing[keep] * (6 * n) + target[keep])
    return key // (6 * n), key % (6 * n)


def _spill_citations(layout: _Layout, cfg: SyntheticConfig, tmp: Path, n_blocks: int) -> None:
    """Write out_<b>.npy (citing, target) and in_<b>.bin (cited, citing) pairs per block."""
    for block in track(range(n_blocks), "synth", "citation blocks", show=n_blocks >= 4):
        citing, target = _sample_block_citations(layout, cfg, block)
        np.save(tmp / array_file(f"out_{block}"), np.stack([citing, target]))
        internal = target < cfg.n_papers
        cited, by = target[internal], citing[internal]
        cited_block = cited // cfg.block_size
        for b in np.unique(cited_block):
            sel = cited_block == b
            with (tmp / f"in_{b}.bin").open("ab") as handle:
                np.stack([cited[sel], by[sel]], axis=1).astype(np.int64).tofile(handle)


def _group_lists(owner: np.ndarray, other: np.ndarray, lo: int, hi: int) -> list[np.ndarray]:
    """Split `other` into one sorted array per owner index in [lo, hi)."""
    order = np.lexsort((other, owner))
    owner, other = owner[order], other[order]
    bounds = np.searchsorted(owner, np.arange(lo, hi + 1))
    return [other[bounds[i] : bounds[i + 1]] for i in range(hi - lo)]


# ---------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------

VERBS = ["examine", "investigate", "characterize", "evaluate", "quantify", "describe",
         "compare", "assess", "analyze", "explore", "estimate", "review", "measure", "test"]
VERBS_3 = ["affects", "predicts", "increases", "reduces", "modulates", "shapes", "determines",
           "improves", "limits", "enhances", "alters", "explains"]
VERBS_PP = ["measured", "observed", "collected", "recorded", "compared", "analyzed", "sampled",
            "examined", "identified", "evaluated"]
ADJECTIVES = ["key", "central", "major", "novel", "robust", "critical", "common", "complex",
              "important", "significant", "distinct", "consistent", "strong", "limited"]
NOUNS = ["study", "analysis", "framework", "approach", "method", "model", "evidence",
         "findings", "review", "survey", "experiment", "comparison", "assessment", "perspective"]
TITLE_TEMPLATES = [
    "{A} and {b} in {c} {d}",
    "The {n} of {a} {b} for {c}",
    "{A} {b}: a {n} of {c} {d}",
    "On the {a} of {b} {c}",
    "Toward {a} {b} with {c} {d}",
    "{A} {b} {c} under {d} {e}",
    "A {j} {n} of {a} {b} in {c}",
    "{A} {b} and {c} {d}: a {j} {n}",
    "Effects of {a} {b} on {c} {d}",
]
SENTENCE_TEMPLATES = [
    "We {v} the {a} of {b} in {c} {d}.",
    "{A} {b} is a {j} {n} in {c} {d}.",
    "Here we {v} {a} {b} using {c} {n}.",
    "Our {n} shows that {a} {b} {v3} {c}.",
    "These {n} results suggest that {a} {v3} {b} {c}.",
    "In this {n}, {a} and {b} were {vp} across {k} {c} {d}.",
    "The {a} {b} {v3} the {c} of {d} {e}.",
    "A total of {k} {a} {b} were {vp}.",
    "{A} {b} remains {j} for {c} {d}.",
    "We further {v} how {a} {b} {v3} the {c} of {d}.",
    "Compared with {a}, {b} {c} showed {j} {d}.",
    "Implications for {a} and {b} {c} are discussed.",
    "Finally, we {v} {a} {b} in relation to {c}.",
    "Using {a} {b}, we {v} {c} and {d}.",
    "The proposed {a} {b} {v3} {c} {d} in {k} cases.",
    "Little is known about {a} {b} in {c}.",
    "{A} {b} and {c} {d} were {vp} with {e} {n}.",
]
SHORT_ABSTRACTS = ["Abstract not available.", "No abstract.", "See full text.", "Editorial.",
                   "Erratum.", "Letter to the editor.", "Book review.", "Correction."]
FIRST = ["Anna", "Ben", "Chen", "Dana", "Elif", "Farid", "Grace", "Hiro", "Ines", "Jonas",
         "Kavya", "Liam", "Maria", "Nikola", "Olga", "Pedro", "Qing", "Rosa", "Sven", "Tariq",
         "Uma", "Viktor", "Wei", "Ximena", "Yusuf", "Zofia"]
LAST = ["Smith", "Wang", "Garcia", "Müller", "Kim", "Rossi", "Novak", "Silva", "Tanaka", "Cohen",
        "Kowalski", "Nguyen", "Okafor", "Petrov", "Larsen", "Dubois", "Patel", "Haddad", "Moreau",
        "Jensen", "Horvat", "Sato", "Fischer", "Ivanova", "Medić", "Šnajder"]


def _pick(rnd: random.Random, seq: list):
    """rnd.choice without its overhead (the generator's hot path)."""
    return seq[int(rnd.random() * len(seq))]


def _randint(rnd: random.Random, n: int) -> int:
    """Uniform integer in [0, n)."""
    return int(rnd.random() * n)


class _TextMaker:
    """Titles, abstracts and bibliographic fields for one paper at a time."""

    def __init__(self, words: dict, cfg: SyntheticConfig):
        rng = random.Random(f"themes-{cfg.seed}")
        self.fields = list(MAG_FIELDS)
        self.field_words = [words[f]["words"] for f in self.fields]
        self.subtopic_names = [name for f in self.fields for name in words[f]["subtopics"]]
        self.subtopic_words = [ws for f in self.fields for ws in words[f]["subtopics"].values()]
        self.all_field_words = [words[f]["words"] + [w for ws in words[f]["subtopics"].values()
                                                     for w in ws] for f in self.fields]
        self.theme_words = [self._theme(rng, subtopic, cfg)
                            for subtopic in range(len(self.subtopic_words))
                            for _ in range(cfg.themes_per_subtopic)]

    def _theme(self, rng: random.Random, subtopic: int, cfg: SyntheticConfig) -> list[str]:
        """A theme's words: some of its subtopic's, and a few of other fields (methods and
        objects that cross fields), so fields overlap in words as real ones do."""
        field = subtopic // (len(self.subtopic_words) // len(self.fields))
        others = rng.sample([f for f in range(len(self.fields)) if f != field],
                            cfg.theme_borrowed)
        return (rng.sample(self.subtopic_words[subtopic], cfg.theme_words - cfg.theme_borrowed)
                + [rng.choice(self.all_field_words[f]) for f in others])

    def keywords(self, field: int, picks: np.ndarray) -> list[str]:
        words = self.all_field_words[field]
        return [words[k] for k in picks]

    def _pools(self, theme: int, subtopic: int, fields: list[int], keywords: list[str],
               cited_keywords: list[str], rnd: random.Random
               ) -> tuple[list[list[str]], list[float]]:
        """Word pools and their cumulative weights: theme, subtopic, field, the paper's own
        keywords, its cited papers' keywords, then secondary fields."""
        n_sub = len(self.subtopic_words) // len(self.fields)
        pools = [self.theme_words[theme], self.subtopic_words[subtopic],
                 self.field_words[subtopic // n_sub], keywords]
        weights = [0.35, 0.2, 0.15, 0.15]
        if cited_keywords:
            pools.append(cited_keywords)
            weights.append(0.15)
        for extra in fields[1:]:
            pools += [self.field_words[extra],
                      self.subtopic_words[extra * n_sub + _randint(rnd, n_sub)]]
            weights += [0.08, 0.06]
        return pools, list(itertools.accumulate(weights))

    @staticmethod
    def _fill(template: str, pools: list[list[str]], cum: list[float], rnd: random.Random
              ) -> str:
        total = cum[-1]
        words = [_pick(rnd, pools[bisect.bisect(cum, rnd.random() * total)]) for _ in range(5)]
        text = template.format(
            a=words[0], b=words[1], c=words[2], d=words[3], e=words[4],
            A=words[0].capitalize(), n=_pick(rnd, NOUNS), j=_pick(rnd, ADJECTIVES),
            v=_pick(rnd, VERBS), v3=_pick(rnd, VERBS_3), vp=_pick(rnd, VERBS_PP),
            k=3 + _randint(rnd, 397),
        )
        return text[0].upper() + text[1:]

    def title(self, pools: list[list[str]], cum: list[float], rnd: random.Random) -> str:
        return self._fill(_pick(rnd, TITLE_TEMPLATES), pools, cum, rnd)

    def abstract(self, pools: list[list[str]], cum: list[float], rnd: random.Random) -> str:
        n_words = min(max(int(rnd.lognormvariate(5.15, 0.4)), 50), 450)  # median ~170
        sentences: list[str] = []
        count = 0
        while count < n_words:
            sentence = self._fill(_pick(rnd, SENTENCE_TEMPLATES), pools, cum, rnd)
            sentences.append(sentence)
            count += sentence.count(" ") + 1
        return " ".join(sentences)

    def record(self, paper_id: int, year: int | None, theme: int, fields: list[int],
               keywords: list[str], cited_keywords: list[str], outbound: list[str],
               inbound: list[str], rnd: random.Random) -> dict:
        """One S2ORC 2020 metadata row (field names, order and null conventions of §1)."""
        subtopic = theme // (len(self.theme_words) // len(self.subtopic_words))
        pools, weights = self._pools(theme, subtopic, fields, keywords, cited_keywords, rnd)
        title = "" if rnd.random() < EMPTY_TITLE_P else self.title(pools, weights, rnd)
        abstract = None
        if rnd.random() < ABSTRACT_P:
            abstract = (rnd.choice(SHORT_ABSTRACTS) if rnd.random() < SHORT_ABSTRACT_P
                        else self.abstract(pools, weights, rnd))
        names = [self.fields[f] for f in fields]
        field_of_study = names if names else (None if rnd.random() < 0.5 else [])
        bio = bool({"Medicine", "Biology", "Psychology"} & set(names))
        arxiv = bool({"Physics", "Computer Science", "Mathematics"} & set(names))
        venue = ""
        if rnd.random() < 0.6:
            sub = self.subtopic_names[subtopic].title()
            venue = f"{rnd.choice(['Journal of', 'Advances in', 'Reviews in'])} {sub}"
        has_pdf = rnd.random() < 0.4
        row = {
            "paper_id": str(paper_id),
            "title": title,
            "authors": [
                {"first": _pick(rnd, FIRST), "middle": [_pick(rnd, "ABCDEFGHJKLMN")]
                 if rnd.random() < 0.3 else [], "last": _pick(rnd, LAST), "suffix": ""}
                for _ in range(1 + _randint(rnd, 8))
            ],
            "abstract": abstract,
            "year": year,
            "arxiv_id": f"{rnd.randint(7, 20):02d}{rnd.randint(1, 12):02d}."
            f"{rnd.randint(1, 99999):05d}" if arxiv and rnd.random() < 0.3 else None,
            "acl_id": None,
            "pmc_id": f"PMC{rnd.randint(1000000, 7999999)}" if bio and rnd.random() < 0.2 else None,
            "pubmed_id": str(rnd.randint(1000000, 33000000)) if bio and rnd.random() < 0.7
            else None,
            "mag_id": str(rnd.randint(10**9, 3 * 10**9)) if rnd.random() < 0.9 else None,
            "doi": f"10.{rnd.randint(1000, 9999)}/{rnd.getrandbits(40):x}"
            if rnd.random() < 0.6 else None,
            "venue": venue,
            "journal": venue if venue and rnd.random() < 0.7 else None,
            "mag_field_of_study": field_of_study,
            "outbound_citations": outbound,
            "inbound_citations": inbound,
            "has_outbound_citations": bool(outbound),
            "has_inbound_citations": bool(inbound),
            "has_pdf_parse": has_pdf,
            "s2_url": f"https://api.semanticscholar.org/CorpusID:{paper_id}",
        }
        if has_pdf:
            row.update({
                "has_pdf_parsed_abstract": abstract is not None,
                "has_pdf_parsed_body_text": rnd.random() < 0.9,
                "has_pdf_parsed_bib_entries": bool(outbound),
                "has_pdf_parsed_ref_entries": rnd.random() < 0.8,
            })
            if rnd.random() < 0.1:
                row["has_pdf_body_text"] = row["has_pdf_parsed_body_text"]
        return row


def _extra_fields(primary: int, rnd: random.Random) -> list[int]:
    """Primary field first, then 0-2 other fields; or no field at all (docs/ingest.md shares)."""
    count = rnd.choices(range(4), weights=N_FIELDS_P)[0]
    if count == 0:
        return []
    others = [f for f in range(len(MAG_FIELDS)) if f != primary]
    return [primary, *rnd.sample(others, count - 1)]


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------


@dataclass
class _BlockJob:
    """What a worker needs to write the papers of one chronological block."""

    cfg: SyntheticConfig
    layout: _Layout
    maker: _TextMaker
    tmp: Path


_JOB: _BlockJob | None = None  # set before forking workers; inherited copy-on-write


def _render_block(block: int) -> tuple[list[bytes], dict[str, int]]:
    """The block's rows as one gzip member per output shard, plus counts.

    Each block is compressed on its own, so the shard files (concatenated gzip members) are
    byte-identical whatever the number of workers.
    """
    assert _JOB is not None
    cfg, layout, maker, tmp = _JOB.cfg, _JOB.layout, _JOB.maker, _JOB.tmp
    n = cfg.n_papers
    lo, hi = block * cfg.block_size, min((block + 1) * cfg.block_size, n)
    citing, target = np.load(tmp / array_file(f"out_{block}"))
    in_path = tmp / f"in_{block}.bin"
    pairs = (np.fromfile(in_path, dtype=np.int64).reshape(-1, 2) if in_path.exists()
             else np.empty((0, 2), dtype=np.int64))
    out_ids = np.where(target < n, layout.paper_id(np.minimum(target, n - 1)),
                       layout.dangling_id(target - n))
    outbound = _group_lists(citing, out_ids, lo, hi)
    inbound = _group_lists(pairs[:, 0], layout.paper_id(pairs[:, 1]), lo, hi)
    internal = target < n
    cited = _group_lists(citing[internal], target[internal], lo, hi)
    ids = layout.paper_id(np.arange(lo, hi))
    rnd = random.Random(f"text-{cfg.seed}-{block}")
    lines: list[list[bytes]] = [[] for _ in range(cfg.n_shards)]
    with_abstract = 0
    for i in range(lo, hi):
        year = None if rnd.random() < NULL_YEAR_P else int(layout.year[i])
        fields = _extra_fields(int(layout.field[i]), rnd)
        sources = cited[i - lo].tolist()
        if len(sources) > KEYWORD_SOURCES:
            sources = rnd.sample(sources, KEYWORD_SOURCES)
        cited_keywords = [w for c in sources
                          for w in maker.keywords(layout.field[c], layout.keywords[c])]
        row = maker.record(int(ids[i - lo]), year, int(layout.theme[i]), fields,
                           maker.keywords(layout.field[i], layout.keywords[i]),
                           cited_keywords, outbound[i - lo].astype(str).tolist(),
                           inbound[i - lo].astype(str).tolist(), rnd)
        lines[i % cfg.n_shards].append(orjson.dumps(row) + b"\n")
        with_abstract += row["abstract"] is not None
    members = [gzip.compress(b"".join(chunk), compresslevel=5, mtime=0) if chunk else b""
               for chunk in lines]
    counts = {"papers": hi - lo, "with_abstract": with_abstract, "edges": len(target),
              "dangling_edges": int((target >= n).sum())}
    return members, counts


def recorded_config(out_dir: Path) -> SyntheticConfig | None:
    """The settings the shards under `out_dir` were generated with (their manifest), None
    when there is no manifest. A damaged one is refused: the settings are lost with it."""
    path = out_dir / MANIFEST
    if not path.exists():
        return None
    info = read_json(path)  # InputError naming the file when damaged
    if info.get("stage") != "synthetic":
        return None
    return SyntheticConfig(**info.get("parameters", {}))


def config_for(out_dir: Path, *, n_papers: int | None = None, n_shards: int | None = None,
               seed: int | None = None) -> SyntheticConfig:
    """The settings to generate the shards under `out_dir` with: those given, the others as
    the shards there were made (or the defaults for a first corpus). A command that gives no
    setting keeps the corpus as it is: a default never remakes a corpus."""
    given = {key: value for key, value in
             (("n_papers", n_papers), ("n_shards", n_shards), ("seed", seed))
             if value is not None}
    try:
        recorded = recorded_config(out_dir)
    except InputError as exc:
        if n_papers is None or seed is None:
            raise InputError(f"{exc.message}: the synthetic corpus's settings are lost with "
                             "it; give its papers and seed to generate it again (make: "
                             "DEMO_PAPERS and DEMO_SEED; synth: --papers and --seed)") from None
        recorded = None
    return replace(recorded or SyntheticConfig(), **given)


def chosen_config(out_dir: Path, *, n_papers: int | None = None, n_shards: int | None = None,
                  seed: int | None = None, repair: bool = False) -> SyntheticConfig:
    """The settings `make corpus` and synth generate the shards under `out_dir` with: with
    `repair`, those recorded (damaged or missing shards written again; refused when lost);
    else config_for's. Keeping the corpus as it is, for want of a setting, is logged."""
    if repair:
        try:
            recorded = recorded_config(out_dir)
            if recorded is None:
                raise InputError(f"{out_dir / MANIFEST}: no synthetic corpus's manifest")
        except InputError as exc:  # the settings are lost with it
            raise InputError(f"{exc.message}: the generator's settings are lost; write the "
                             "shards again with those it was made with (synth --papers N "
                             "--shards K --seed S; make: DEMO_PAPERS and DEMO_SEED)") from None
        return recorded
    cfg = config_for(out_dir, n_papers=n_papers, n_shards=n_shards, seed=seed)
    if n_papers is None and n_shards is None and seed is None \
            and cfg == recorded_config(out_dir):
        log.info("synth: %s: the synthetic corpus as it is (%s); give --papers, --seed "
                 "(make: DEMO_PAPERS, DEMO_SEED) to generate it again with others",
                 out_dir.parent.name, described(cfg))
    return cfg


def described(cfg: SyntheticConfig) -> str:
    """A corpus's settings in words, for log lines."""
    return f"{cfg.n_papers:,} papers, {cfg.n_shards} shards, seed {cfg.seed}"


def _current(out_dir: Path, cfg: SyntheticConfig) -> dict | None:
    """The manifest of shards generated with `cfg` that are still intact (checksums), else
    None: damaged or missing shards are generated again, byte for byte."""
    path = out_dir / MANIFEST
    wanted = json.loads(json.dumps(asdict(cfg)))
    return read_json(path) if stale(path, wanted, files=out_dir) is None else None


def generate(out_dir: Path, cfg: SyntheticConfig, workers: int = 1) -> dict:
    """Write `metadata/metadata_{k}.jsonl.gz` shards and a manifest under `out_dir`.

    `workers` processes (at most one per block) render blocks in parallel; the bytes written
    do not depend on it.
    """
    global _JOB
    if cfg.n_papers < 100 or not 1 <= cfg.n_shards <= MAX_SYNTHETIC_SHARDS:
        raise InputError(
            f"synthetic corpus of {cfg.n_papers} papers in {cfg.n_shards} shards: "
            f"ask for at least 100 papers and 1 to {MAX_SYNTHETIC_SHARDS} shards (each shard "
            "is a file written at once)"
        )
    if cfg.block_size < 1:
        raise InputError(f"synthetic corpus with block_size={cfg.block_size}: give 1 or more "
                         "papers per block (the default: 50,000)")
    current = _current(out_dir, cfg)
    if current is not None:
        return current
    with contextlib.suppress(InputError):  # a damaged manifest: nothing to compare with
        before = recorded_config(out_dir)
        if before is not None and before != cfg:
            log.info("synth: %s: generated again with %s (was %s): the corpus made from it, "
                     "its pools, indexes and runs are made again", out_dir, described(cfg),
                     described(before))
    word_lists = load_words()
    first = next(iter(word_lists.values()))
    n_field_words = len(first["words"]) + sum(len(ws) for ws in first["subtopics"].values())
    layout = _Layout(cfg, len(first["subtopics"]), n_field_words)
    n_blocks = -(-cfg.n_papers // cfg.block_size)
    meta_dir = out_dir / "metadata"
    (out_dir / MANIFEST).unlink(missing_ok=True)  # written last: the corpus is complete
    counts = dict.fromkeys(("papers", "with_abstract", "edges", "dangling_edges"), 0)
    names = [SYNTHETIC_SHARD.format(k) for k in range(cfg.n_shards)]
    # shards are written into a temporary folder that replaces metadata/ whole
    with scratch_dir(out_dir, "synth") as work, atomic_dir(meta_dir) as tmp_meta:
        _spill_citations(layout, cfg, work, n_blocks)
        _JOB = _BlockJob(cfg, layout, _TextMaker(word_lists, cfg), work)
        with contextlib.ExitStack() as stack:
            handles = [stack.enter_context((tmp_meta / name).open("wb")) for name in names]
            processes = min(workers, n_blocks)  # never more workers than blocks to render
            if processes > 1:
                pool = stack.enter_context(worker_pool(processes, "fork"))
                rendered = pool.map(_render_block, range(n_blocks))
            else:
                rendered = map(_render_block, range(n_blocks))
            for members, block_counts in track(rendered, "synth", "paper blocks", n_blocks,
                                               show=n_blocks >= 4):
                for handle, member in zip(handles, members, strict=True):
                    handle.write(member)
                for key, value in block_counts.items():
                    counts[key] += value
        _JOB = None
    final = [meta_dir / name for name in names]
    info = manifest("synthetic", asdict(cfg), counts=counts,
                    shards=[p.name for p in final], format="s2orc-20200705v1-metadata",
                    outputs=fingerprints(out_dir, [f"metadata/{name}" for name in names]))
    write_json(info, out_dir / MANIFEST)
    return info
