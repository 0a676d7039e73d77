"""How well a sentence splitter reproduces CSFCube's released sentence split (the split the
CSFCube authors made of every abstract, with scispaCy; ASPIRE's models were trained on such
splits). For corpora that ship no split of their own (S2ORC, BEIR layouts), the multi-vector
entries split abstracts with pipeline.encoding.multivector.split_sentences; this measures it,
and the PyPI splitters that could replace it, side by side on the same abstracts.

Input: a CSFCube checkout (github.com/iesl/CSFCube); its `readable_annotations/*.txt` list the
query papers and their judged candidates, each abstract one sentence per line
(`ABSTRACT: <label>_label: <sentence>`, then `<label>_label: <sentence>` ...). Every distinct
paper is read once (a paper in several files must have the same sentences there). A paper's
abstract is its sentences joined by a space, as `make import-csfcube` joins them; a reference
boundary is the start of each sentence but the first. Per splitter: the share of papers split
identically, missed and extra boundaries, and the words before the missed and the extra
boundaries most often.

Held out: CSFCube's papers are split once, by a seeded hash of the paper id (held_out: a third
of them), and rules of the project's splitter are chosen by reading the other two thirds only
(from regex-v3 on; regex-v2's rules were read on all of CSFCube, so its held-out figure is not
one). The figures are given for the fitted part, the held-out part and all papers.

Another collection: CSAbstruct (github.com/allenai/sequential_sentence_classification,
data/CSAbstruct/{train,dev,test}.jsonl: 2189 computer-science abstracts, each a list of
`sentences`), a released split made otherwise than scispaCy's, given as a second argument.

Writes benchmarks/results/sentence_split.{md,json}.

Usage: .venv/bin/python benchmarks/sentence_split.py /path/to/CSFCube [/path/to/CSAbstruct]
(the library splitters need `pip install pysbd blingfire spacy`; one not installed is listed
as such, not measured)
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.machine import machine  # noqa: E402
from pipeline.encoding.multivector import SPLITTER, split_sentences  # noqa: E402

OUT = Path(__file__).parent / "results"
Spans = list[tuple[int, int]]
LABELED = re.compile(r"^(?:ABSTRACT: )?[a-z]+_label: (.*)$")


def read_papers(release: Path) -> dict[str, list[str]]:
    """paper_id -> its sentences, from every readable annotation file (sorted by name)."""
    papers: dict[str, list[str]] = {}
    files = sorted((release / "readable_annotations").glob("*.txt"))
    if not files:
        raise SystemExit(f"{release}/readable_annotations/*.txt: none; give a CSFCube checkout")
    for path in files:
        paper, sentences = None, None
        for line in [*path.read_text(encoding="utf-8").splitlines(), ""]:
            if line.startswith("paper_id: "):
                paper = line.removeprefix("paper_id: ").split(";")[0].strip()
            elif line.startswith("ABSTRACT: "):
                sentences = []
            if sentences is not None:
                match = LABELED.match(line)
                if match and match.group(1).strip():
                    sentences.append(match.group(1).strip())
                elif not match:  # the abstract ended (a blank or ==== line)
                    if papers.setdefault(paper, sentences) != sentences:
                        raise SystemExit(f"{path}: paper {paper} has other sentences than "
                                         "in an earlier file")
                    paper, sentences = None, None
    return {paper: sentences for paper, sentences in sorted(papers.items()) if sentences}


# CSFCube's papers held out of rule fitting: a fixed, seeded hash of the paper id, a third.
HOLD_OUT_SEED = "sentence-split-holdout"


def held_out(paper: str) -> bool:
    """Whether a CSFCube paper is held out of the splitter's rule fitting (docs/encoders.md)."""
    digest = hashlib.sha256(f"{HOLD_OUT_SEED}:{paper}".encode()).hexdigest()
    return int(digest[:8], 16) % 3 == 0


def read_csabstruct(folder: Path) -> dict[str, list[str]]:
    """'<file>:<line>' -> its sentences, from CSAbstruct's train, dev and test files."""
    papers = {}
    for name in ("train", "dev", "test"):
        path = folder / f"{name}.jsonl"
        if not path.is_file():
            raise SystemExit(f"{path}: missing; give CSAbstruct's data folder")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            papers[f"{name}:{number}"] = [s.strip() for s in json.loads(line)["sentences"]]
    return papers


def regex(text: str) -> Spans:
    return split_sentences(text)


# The project's splitter before this benchmark (regex-v1), restated to measure "before": a
# boundary needed a capital, digit or opening quote/bracket next, and lowercase dotted words
# ("e.g.", "i.e.") and "et al." were never boundaries.
_V1 = re.compile(r"(\S*?)[.!?]+[\"'\u201d\u2019)\]]*(?=\s+[\"'\u201c\u2018(\[]?[A-Z0-9])")
_V1_WORDS = frozenset(
    "al approx ca cf co corp dept dr eq eqs fig figs inc jr ltd mr mrs ms no nos pp prof ref "
    "refs resp sec sect sp spp sr st subsp tab univ var viz vol vs".split())


def regex_v1(text: str) -> Spans:
    spans, start = [], 0
    for match in _V1.finditer(text):
        word = match.group(1).lstrip("\"'([\u201c\u2018")
        if (word.lower() in _V1_WORDS or re.fullmatch(r"[A-Za-z](\.[A-Za-z])+", word)
                or (len(word) == 1 and word.isalpha())):
            continue
        spans.append((start, match.end()))
        start = match.end()
    spans.append((start, len(text)))
    return _stripped(text, spans)


# regex-v2, the project's splitter before regex-v3, restated to measure it: regex-v3 with no
# ellipsis rule, Greek letters taken for initials, and punctuation alone a sentence.
_V2_WORDS = frozenset("co corp dr inc jr ltd mr mrs ms prof sr st vs".split())


def regex_v2(text: str) -> Spans:
    spans, start = [], 0
    for match in re.finditer(r"(\S*?)[.!?]+[\"')\]]*(?=\s+\S)", text):
        word = match.group(1).lstrip("\"'([\u201c\u2018")
        if (word.lower() in _V2_WORDS or re.fullmatch(r"[A-Z](\.[A-Z])+", word)
                or (len(word) == 1 and word.isalpha())):
            continue
        spans.append((start, match.end()))
        start = match.end()
    spans.append((start, len(text)))
    return _stripped(text, spans)


def _stripped(text: str, spans: Spans) -> Spans:
    return [(lo + len(text[lo:hi]) - len(text[lo:hi].lstrip()),
             hi - len(text[lo:hi]) + len(text[lo:hi].rstrip()))
            for lo, hi in spans if text[lo:hi].strip()]


def pysbd_splitter() -> Callable[[str], Spans]:
    import pysbd

    segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)
    return lambda text: [(s.start, s.end) for s in segmenter.segment(text)]


def blingfire_splitter() -> Callable[[str], Spans]:
    import blingfire

    def split(text: str) -> Spans:
        _, offsets = blingfire.text_to_sentences_and_offsets(text)
        return [(int(a), int(b)) for a, b in offsets]
    return split


def spacy_splitter() -> Callable[[str], Spans]:
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return lambda text: [(s.start_char, s.end_char) for s in nlp(text).sents]


def starts(spans: Spans, text: str) -> set[int]:
    """Boundaries: where each sentence but the first starts (leading spaces skipped)."""
    out = set()
    for a, _ in spans[1:]:
        while a < len(text) and text[a].isspace():
            a += 1
        out.add(a)
    return out


def measure(split: Callable[[str], Spans], papers: dict[str, list[str]]) -> dict:
    identical, missed, extra, boundaries, before, after = 0, 0, 0, 0, Counter(), Counter()
    for sentences in papers.values():
        text, want, at = "", set(), 0
        for sentence in sentences:
            if text:
                text += " "
                want.add(len(text))
            text += sentence
            at = len(text)
        del at
        got = starts(split(text), text)
        boundaries += len(want)
        identical += got == want
        missed += len(want - got)
        extra += len(got - want)
        for counts, places in ((before, want - got), (after, got - want)):
            for b in places:
                words = text[:b].split()
                counts[words[-1] if words else ""] += 1
    return {"papers": len(papers), "identical": identical,
            "identical_share": round(identical / len(papers), 4),
            "boundaries": boundaries, "missed": missed, "extra": extra,
            "missed_after": _most(before), "extra_after": _most(after)}


def _most(counts: Counter) -> list[list]:
    return [[w, n] for w, n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))[:8]]


def main(release: Path, csabstruct: Path | None) -> None:
    papers = read_papers(release)
    parts = {"CSFCube fitted": {p: s for p, s in papers.items() if not held_out(p)},
             "CSFCube held out": {p: s for p, s in papers.items() if held_out(p)},
             "CSFCube": papers}
    if csabstruct is not None:
        parts["CSAbstruct"] = read_csabstruct(csabstruct)
    splitters: dict[str, Callable[[], Callable[[str], Spans]]] = {
        "project regex-v1": lambda: regex_v1,
        "project regex-v2 (before)": lambda: regex_v2,
        f"project {SPLITTER} (pipeline.encoding.multivector, now)": lambda: regex,
        "pysbd (rule-based, Golden Rules)": pysbd_splitter,
        "blingfire (Microsoft, compiled rules)": blingfire_splitter,
        "spaCy sentencizer (punctuation rules)": spacy_splitter,
    }
    rows = {}
    for name, make in splitters.items():
        try:
            split = make()
        except ImportError as exc:
            rows[name] = {"not_measured": f"not installed ({exc.name})"}
            continue
        t0 = time.perf_counter()
        rows[name] = {part: measure(split, chosen) for part, chosen in parts.items()}
        rows[name]["seconds"] = round(time.perf_counter() - t0, 3)
    figures = {"machine": machine(), "date": time.strftime("%Y-%m-%d"),
               "source": "CSFCube readable_annotations (distinct papers), held out by "
                         f"sha256('{HOLD_OUT_SEED}:<paper id>') % 3 == 0; CSAbstruct",
               "splitters": rows}
    OUT.mkdir(exist_ok=True)
    (OUT / "sentence_split.json").write_text(json.dumps(figures, indent=2) + "\n")
    measured = next(r for r in rows.values() if "not_measured" not in r)
    sizes = ", ".join(f"{part} {measured[part]['papers']}" for part in parts)
    lines = ["# Sentence splitters against released sentence splits", "",
             f"{machine()}; {figures['date']}. Abstracts: the {len(papers)} distinct papers of "
             "CSFCube's readable_annotations, their sentences joined by a space; a reference "
             "boundary is each sentence start but the first "
             f"({measured['CSFCube']['boundaries']} in all). CSFCube's papers are split once by "
             f"a seeded hash of the paper id (`sha256('{HOLD_OUT_SEED}:<id>')`, the first 8 hex "
             "digits modulo 3 == 0: held out); the rules of regex-v3 were chosen on the fitted "
             "part only. CSAbstruct: the released sentences of its 2189 abstracts (train, dev "
             f"and test). Papers: {sizes}. `python benchmarks/sentence_split.py CSFCube/ "
             "sequential_sentence_classification/data/CSAbstruct/`.", "",
             "Papers split identically:", "",
             "| splitter | " + " | ".join(parts) + " |",
             "|---|" + "---|" * len(parts)]
    for name, row in rows.items():
        if "not_measured" in row:
            lines.append(f"| {name} | {row['not_measured']} |" + " |" * (len(parts) - 1))
            continue
        lines.append(f"| {name} | " + " | ".join(
            f"{row[part]['identical']} / {row[part]['papers']} "
            f"({100 * row[part]['identical_share']:.1f}%)" for part in parts) + " |")
    for part in ("CSFCube", "CSAbstruct"):
        if part not in parts:
            continue
        lines += ["", f"Boundaries on {part}:", "",
                  "| splitter | missed | extra | most missed after | most extra after |",
                  "|---|---|---|---|---|"]
        for name, row in rows.items():
            if "not_measured" not in row:
                got = row[part]
                lines.append(f"| {name} | {got['missed']} | {got['extra']} | "
                             f"{_words(got['missed_after'])} | {_words(got['extra_after'])} |")
    lines += ["", "regex-v2's rules were chosen by reading regex-v1's misses on all of "
              "CSFCube: its held-out figure is no held-out one. regex-v3's changes (an ellipsis "
              "ends no sentence, punctuation alone is no sentence, a Greek letter is no "
              "initial) were read on the fitted part only. CSFCube's split is scispaCy's, the "
              "split ASPIRE was trained on: it ends sentences after `e.g.`, `i.e.`, `et al.`, "
              "not after a period inside curly quotes nor at a heading, and so does "
              f"{SPLITTER}; CSAbstruct's split does not end them after `e.g.`, `i.e.` and "
              "`et al.`, most of its extra boundaries. The punctuation-only sentences scispaCy "
              "made (`.`, `;`, `*` alone) are left out on purpose: the held-out papers "
              f"{SPLITTER} splits otherwise than regex-v2 are all such."]
    (OUT / "sentence_split.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _words(counts: list[list]) -> str:
    return ", ".join(f"`{w}` {n}" for w, n in counts[:5])


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "CSFCube"),
         Path(sys.argv[2]) if len(sys.argv) > 2 else None)
