"""The family of a model folder, read from its own configuration, and the kind that runs it.

A folder says what its weights compute, as the library that wrote it reads it back
(sentence-transformers 6.2's `_get_model_type`, and its MultiVectorEncoder's for ColBERT):

1. `config_sentence_transformers.json`'s "model_type", as sentence-transformers (5.0 on) writes
   it: SentenceTransformer (dense), SparseEncoder (learned sparse), CrossEncoder (a reranker),
   MultiVectorEncoder (late interaction); "ColBERT" is PyLate's class, as sentence-transformers
   5 (which PyLate pins) records it;
2. without one, a folder of sentence-transformers modules (modules.json): PyLate's when a
   module is PyLate's (`pylate.models.Dense.Dense`) or it scores by MaxSim (PyLate before
   sentence-transformers 5), else a SentenceTransformer (sentence-transformers' default);
3. a plain transformers folder (no modules.json) by config.json's "architectures": HF_ColBERT
   is a Stanford ColBERT checkpoint, a `*ForSequenceClassification` a cross-encoder (what
   CrossEncoder loads), anything else a plain transformer ("transformers": an encoder's hidden
   states, pooled as its entry says; a SPLADE checkpoint saved without sentence-transformers'
   files is one of these, not told apart from a BERT with its MLM head).

FAMILY_KINDS maps a family to the model kind (pipeline/models.py) that runs it: a kind of
folders adds its family here, one line. `kind_for` is the one rule every door applies: an st:
model runs as its folder's family (routed to that kind), any other entry (hf:, registered) only
on a folder of its own kind or of a plain encoder; a folder of a family no kind runs is refused
in one line naming the family, before any weight is read. Standard library only: make's check
applies it before the environment exists.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from pipeline.core.errors import InputError
from pipeline.encoding.identity import FOLDER_KINDS, weights_folder
from pipeline.layout import HF_CONFIG, ST_CONFIG, ST_MODULES
from pipeline.models import HF_FILE_PREFIX, ST_FILE_PREFIX, ST_KIND, ModelEntry

FAMILY_FILES = (ST_CONFIG, ST_MODULES, HF_CONFIG)  # what family_of reads, nothing else

# The families family_of names, each in words (a refusal names it)
FAMILIES: dict[str, str] = {
    "SentenceTransformer": "a sentence-transformers SentenceTransformer (dense)",
    "SparseEncoder": "a sentence-transformers SparseEncoder (learned sparse)",
    "CrossEncoder": "a cross-encoder (a reranker: it scores a pair, embeds no paper)",
    "MultiVectorEncoder": "a sentence-transformers MultiVectorEncoder (late interaction)",
    "PyLate": "a PyLate ColBERT model (late interaction)",
    "ColBERT": "a Stanford ColBERT checkpoint (late interaction)",
    "transformers": "a transformers model without sentence-transformers modules",
}
# model_type "ColBERT": PyLate's class, as sentence-transformers 5 records a subclass's name
PYLATE_TYPES = {"ColBERT": "PyLate"}

# The kind that runs each family's folders (pipeline/models.py ENCODERS and the retrievers'
# registry); a family not here is refused. `st` runs a plain transformers folder as
# sentence-transformers does (its default mean pooling), as SentenceTransformer(folder) would.
FAMILY_KINDS: dict[str, str] = {
    "SentenceTransformer": ST_KIND,
    "transformers": ST_KIND,
    "SparseEncoder": "sparse",  # pipeline/encoding/sparse.py
    "PyLate": "late-interaction",  # pipeline/encoding/late.py
    "ColBERT": "late-interaction",  # a Stanford checkpoint, read as PyLate reads it
    "CrossEncoder": "reranker",  # pipeline/encoding/cross.py (make rerank)
}
# The similarity a kind scores by where it is not the st: entry's cosine: an st: model routed
# to such a kind records it (its store's entry says what its runs score)
KIND_SIMILARITY: dict[str, str] = {"sparse": "ip", "late-interaction": "ip"}


def folder_json(path: Path) -> object | None:
    """A model folder's JSON file at `path`, None where it has none; a file that is not JSON
    is refused in one line (its loader would fail on it too)."""
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} cannot be read as JSON ({exc}): the model's folder is "
                         "damaged; save or download it again") from None


def family_of(folder: str | Path) -> str:
    """The family of the model saved in `folder` (see the module's docstring): a key of
    FAMILIES, or the "model_type" its sentence-transformers configuration names when that is
    none of them (a newer class: refused by name)."""
    folder = Path(folder)
    config = folder_json(folder / ST_CONFIG)
    config = config if isinstance(config, dict) else {}
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type:
        return PYLATE_TYPES.get(model_type, model_type)
    modules = folder_json(folder / ST_MODULES)
    if isinstance(modules, list):
        types = [str(m.get("type", "")) for m in modules if isinstance(m, dict)]
        if any(t.startswith("pylate.") for t in types) or \
                config.get("similarity_fn_name") == "MaxSim":
            return "PyLate"
        return "SentenceTransformer"
    hf = folder_json(folder / HF_CONFIG)
    architectures = (hf.get("architectures") if isinstance(hf, dict) else None) or []
    if "HF_ColBERT" in architectures:
        return "ColBERT"
    if any(str(a).endswith("ForSequenceClassification") for a in architectures):
        return "CrossEncoder"
    return "transformers"


def door(entry: ModelEntry) -> str:
    """How the user named `entry`: `st:<org>/<name>`, `hf:<org>/<name>`, or its name."""
    if entry.name.startswith(ST_FILE_PREFIX):
        return f"st:{entry.hf_id}"
    if entry.name.startswith(HF_FILE_PREFIX):
        return f"hf:{entry.hf_id}"
    return entry.name


def kind_for(entry: ModelEntry, folder: str | Path) -> str:
    """The kind that runs `entry` on the weights in `folder`: an st: model's, its folder's
    family's (FAMILY_KINDS); any other's, its own, where the folder is of that kind or a plain
    encoder's (the families st: runs: hf: and registered encoders pool it as their entry
    says). Else an InputError naming the family and what to give."""
    family = family_of(folder)
    kind = FAMILY_KINDS.get(family)
    if kind is not None and (kind == entry.kind or entry.kind == ST_KIND):
        return kind
    if kind == ST_KIND:
        return entry.kind
    raise _refusal(entry, family, kind, folder)


def _refusal(entry: ModelEntry, family: str, kind: str | None, folder: str | Path
             ) -> InputError:
    """The one line refusing `entry` on a folder of `family`, run by `kind` (None: by none)."""
    words = FAMILIES.get(family, f"a sentence-transformers {family}")
    named = door(entry)
    how = f"MODEL={named.partition(':')[0]}:" if ":" in named else f"MODEL={named}"
    if kind is not None:  # run by another kind: the st: door routes it there
        give = (f"give MODEL=st:{entry.hf_id or '<org>/<name>'} MODEL_PATH={folder}, which "
                f"runs it as a {kind} model")
    else:
        give = ("give a folder of a dense encoder (a SentenceTransformer, or a plain "
                "transformers model), or bring its runs computed elsewhere in with make "
                "import-run (docs/encoders.md, model families)")
    kind_words = "dense" if entry.kind == ST_KIND else entry.kind
    return InputError(f"MODEL {named}: its folder {folder} is {words}, which {how} does not "
                      f"load as a {kind_words} encoder; {give}")


def routed(entry: ModelEntry, model_path: str | Path | None = None) -> ModelEntry:
    """`entry` as the kind that runs it on its weights' folder (MODEL_PATH, else its package's
    or hub snapshot's: identity.weights_folder; kind_for): an st: model of a SparseEncoder
    folder becomes the sparse kind's once FAMILY_KINDS maps it. Unchanged for a kind without
    a folder of its own, or a hub model not downloaded yet (its loader checks it:
    check_source)."""
    if entry.kind not in FOLDER_KINDS:
        return entry
    folder, _ = weights_folder(entry, model_path)
    if folder is None:
        return entry
    kind = kind_for(entry, folder)
    return entry if kind == entry.kind else replace(
        entry, kind=kind, similarity=KIND_SIMILARITY.get(kind, entry.similarity))


def check_source(entry: ModelEntry, source: str, offline: bool) -> None:
    """The loaders' door (pipeline/encoding/encoders.py, stmodels.py), before any weight is
    read: refuse weights at `source` (a folder, or a hub id whose configuration files alone
    are fetched first: FAMILY_FILES) that `entry`'s own kind does not run (kind_for), in one
    line."""
    if Path(source).is_dir():
        folder = Path(source)
    else:
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(source, allow_patterns=list(FAMILY_FILES),
                                        local_files_only=offline))
    kind = kind_for(entry, folder)
    if kind != entry.kind:
        raise _refusal(entry, family_of(folder), kind, source)
