"""QUERY_PROMPT: a prompt the user puts before each query's text (an instruction, or one of an
st: model's prompt names). The model is `<name>+q<tag>`: its own runs, recording the prompt;
its papers are the model's own store, untouched; the query vectors are sentence-transformers'
with that prompt (to 1e-5). A name known with its tag only cannot encode queries."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import pipeline
from pipeline.core.errors import InputError
from pipeline.core.files import read_json
from pipeline.encoding.stmodels import STEncoder
from pipeline.glossary import prompt_tag, split_prompt_tag
from pipeline.layout import run_paths, store_dir
from pipeline.models import chosen_model, get_model, with_query_prompt
from pipeline.pools.build import PoolSpec, build_pool
from pipeline.pools.queries import query_texts
from pipeline.retrieval.runs import recorded_run_repair
from tests.conftest import POOL_SEED, copy_corpus, decoder_backbone

INSTRUCTION = "Instruct: Given a paper, retrieve papers it cites\\nQuery: "  # as make holds it
PROMPTS = {"query": "query: ", "document": "passage: ", "cites": "Represent the cited work: "}
ST_LENGTH = 128  # the st: folder's max_seq_length: room for INSTRUCTION and a query's text


# ---- the names ---------------------------------------------------------------------------
def test_a_prompt_names_its_own_model_whose_store_is_the_models():
    entry = with_query_prompt(get_model("st:org/name"), INSTRUCTION)
    text = "Instruct: Given a paper, retrieve papers it cites\nQuery: "
    assert entry.query_prompt == entry.query_form == text  # \n written on make's line: a break
    assert entry.name == f"st--org--name+{prompt_tag(text)}"
    assert entry.describe() == get_model("st:org/name").describe()  # what the store records
    assert store_dir(Path("i"), "c", entry.name) == store_dir(Path("i"), "c", "st--org--name")
    other = with_query_prompt(get_model("st:org/name"), "Represent: ")
    assert other.name != entry.name
    # make's name: POOLING, PRECISION, then the prompt; read back by its name
    made = chosen_model("hf:org/name", "lasttoken", "bf16", INSTRUCTION)
    assert made.name == f"hf--org--name--lasttoken+bf16+{prompt_tag(text)}"
    assert get_model(made.name).describe() == made.describe()
    assert with_query_prompt(get_model(made.name), INSTRUCTION) == made
    assert with_query_prompt(get_model("minilm"), "") == get_model("minilm")


def test_a_name_without_its_prompt_cannot_encode_queries():
    known = get_model(with_query_prompt(get_model("minilm"), INSTRUCTION).name)
    assert known.query_prompt is None
    with pytest.raises(InputError, match="give QUERY_PROMPT, the query prompt its tag"):
        known.query_form  # noqa: B018
    with pytest.raises(InputError, match="named after another query prompt"):
        with_query_prompt(known, "Represent: ")


def test_a_prompts_name_alone_never_reads_the_models_cached_queries(tmp_path):
    """A `+q<tag>` name given without its prompt (a collection's text queries, whose vectors
    are cached beside the store) is refused, never served the model's own query vectors; a
    precision after the tag is refused, naming the order."""
    from pipeline.encoding.query_vectors import query_cache

    texts = pl.DataFrame({"corpusid": ["q1"], "title": ["t"], "abstract": ["a"]})
    tagged = with_query_prompt(get_model("minilm"), "query: ")
    assert query_cache(tmp_path, tagged, texts) != query_cache(tmp_path, get_model("minilm"),
                                                               texts)
    with pytest.raises(InputError, match="give QUERY_PROMPT"):
        query_cache(tmp_path, get_model(tagged.name), texts)
    with pytest.raises(InputError, match="name the precision before the query prompt's tag"):
        get_model(f"{tagged.name}+bf16")


@pytest.mark.parametrize("model, message", [
    ("bm25", "bm25 is a bm25 model"), ("aspire-cs", "multi-vector model"),
    ("vectors:mine", "vectors model"),
])
def test_a_prompt_for_a_model_that_encodes_no_text_is_refused(model, message):
    with pytest.raises(InputError, match=message):
        with_query_prompt(get_model(model), "query: ")
    with pytest.raises(InputError, match="takes none"):
        get_model(f"{get_model(model).name}+{prompt_tag('query: ')}")


@pytest.mark.parametrize("model", ["minilm", "hf:org/name", "st:org/name"])
def test_a_one_word_prompt_is_a_prompt_name_and_a_literal_one_has_a_trailing_space(model):
    """A model with no named prompts (registered dense, hf:) refuses a one-word QUERY_PROMPT
    (a mistyped name would be prepended as text), saying how to give a literal one; an st:
    model's names are known once loaded (STEncoder). 'cites ' is the literal word."""
    entry = get_model(model)
    if entry.kind == "st":
        assert with_query_prompt(entry, "cites").query_prompt == "cites"
    else:
        with pytest.raises(InputError, match=r"has no named prompts.*QUERY_PROMPT='cites '"):
            with_query_prompt(entry, "cites")
    literal = with_query_prompt(entry, "cites ")
    assert literal.query_form == "cites "
    assert literal.name != with_query_prompt(entry, "cites: ").name


# ---- the vectors and the runs ------------------------------------------------------------
@pytest.fixture(scope="module")
def folder(corpus_dir, tmp_path_factory) -> Path:
    """A tiny Qwen2 sentence-transformers folder: last-token pooling on left padding, the
    prompts excluded from nothing, and named prompts (query, document, cites)."""
    from tests.encoding.test_stmodels import st_folder

    backbone = decoder_backbone(corpus_dir, tmp_path_factory.mktemp("qwen2"), "left")
    return st_folder(backbone, tmp_path_factory.mktemp("st") / "model", "lasttoken",
                     max_seq_length=ST_LENGTH, prompts=PROMPTS)


@pytest.mark.slow
@pytest.mark.parametrize("prompt, theirs", [
    ("cites", {"prompt_name": "cites"}), (INSTRUCTION, {"prompt": INSTRUCTION.replace(
        "\\n", "\n")})], ids=["named", "text"])
def test_query_vectors_are_sentence_transformers_with_the_prompt(folder, corpus_dir, prompt,
                                                                  theirs):
    papers = pl.read_parquet(corpus_dir / "prefiltered.parquet").head(6)
    rows = papers.select("title", "abstract").rows()
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu")
    texts = [f"{t or ''} {a or ''}".strip() for t, a in rows]
    encoder = STEncoder(with_query_prompt(get_model("st:tiny/model"), prompt),
                        model_path=folder, device="cpu")
    queries, _ = encoder.encode([encoder.format(t, a, query=True) for t, a in rows],
                                progress=False)
    np.testing.assert_allclose(queries, model.encode(texts, batch_size=3, **theirs), atol=1e-5)
    docs, _ = encoder.encode([encoder.format(t, a) for t, a in rows], progress=False)
    np.testing.assert_allclose(docs, model.encode_document(texts, batch_size=3), atol=1e-5)


@pytest.mark.slow
def test_a_prompts_runs_are_its_own_and_its_papers_the_models(corpus_dir, folder, tmp_path):
    """The model searched, then with a prompt: the prompt's run under its own name, scored by
    sentence-transformers' query vectors with that prompt against the stored papers, which
    are left as they were (nothing embedded again); the run records the prompt; searched
    again, nothing changes; scored by its name alone; searched by its name alone, refused."""
    corpus = copy_corpus(corpus_dir, tmp_path / "corpora" / "small")
    spec = PoolSpec(size=120, queries=4, seed=POOL_SEED)
    build_pool(corpus, spec)
    data = pipeline.Data(corpora=corpus.parent, indexes=tmp_path / "indexes",
                         runs=tmp_path / "runs")
    base = pipeline.search(data, "small", spec.name, "st:tiny/model", k=50, threads=1,
                           model_path=folder)
    store = store_dir(data.indexes, "small", base)
    before = {p.relative_to(store): p.read_bytes() for p in sorted(store.rglob("*"))
              if p.is_file() and "queries" not in p.parts}
    name = pipeline.search(data, "small", spec.name, "st:tiny/model", k=50, threads=1,
                           model_path=folder, query_prompt="cites")
    assert name == f"{base}+{prompt_tag('cites')}"
    after = {p.relative_to(store): p.read_bytes() for p in sorted(store.rglob("*"))
             if p.is_file() and "queries" not in p.parts}
    assert after == before
    paths = run_paths(data.runs, "small", spec.name, name)
    run, theirs = (pl.read_parquet(run_paths(data.runs, "small", spec.name, n).parquet)
                   for n in (name, base))
    assert not run.select("query", "doc").equals(theirs.select("query", "doc"))
    assert read_json(paths.manifest)["details"]["query_prompt"] == "cites"
    # each score: sentence-transformers' cosine of the prompted query and the stored paper
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu")
    queries = query_texts(corpus, pl.read_parquet(
        corpus / "pools" / spec.name / "queries.parquet"))
    qvec = model.encode([f"{t} {a}".strip() for t, a in queries.select("title", "abstract")
                         .rows()], prompt_name="cites", normalize_embeddings=True)
    docs = pl.read_parquet(corpus / "prefiltered.parquet").filter(
        pl.col("corpusid").is_in(run["doc"].unique().to_list()))
    dvec = model.encode_document([f"{t or ''} {a or ''}".strip() for t, a in
                                  docs.select("title", "abstract").rows()],
                                 normalize_embeddings=True)
    row_of = {d: i for i, d in enumerate(docs["corpusid"].to_list())}
    q_of = {q: i for i, q in enumerate(queries["corpusid"].to_list())}
    want = [float(qvec[q_of[q]] @ dvec[row_of[d]]) for q, d in run.select("query", "doc").rows()]
    np.testing.assert_allclose(run["score"].to_numpy(), want, atol=1e-5)
    stamp = paths.manifest.stat().st_mtime_ns
    pipeline.search(data, "small", spec.name, "st:tiny/model", k=50, threads=1,
                    model_path=folder, query_prompt="cites")
    assert paths.manifest.stat().st_mtime_ns == stamp
    scored = pipeline.evaluate(data, "small", spec.name, name, means=True)
    assert scored["model"].to_list() == [name]
    repair = recorded_run_repair(data.runs, "small", spec.name, name).command()
    assert f"MODEL={name}" in repair and "QUERY_PROMPT=cites" in repair
    fresh = pipeline.Data(corpora=corpus.parent, indexes=data.indexes, runs=tmp_path / "other")
    with pytest.raises(InputError, match="give QUERY_PROMPT"):
        pipeline.search(fresh, "small", spec.name, name, k=50, threads=1, model_path=folder)


def test_a_one_word_prompt_the_st_model_does_not_name_is_refused_naming_its_names(folder):
    """QUERY_PROMPT=citse (a typo of the folder's 'cites') is refused, naming the prompts;
    'cites' stands for its text, and 'cites ' (a trailing space) is the literal word."""
    model = get_model("st:tiny/model")
    with pytest.raises(InputError, match=r"QUERY_PROMPT=citse names no prompt of MODEL "
                       r"st--tiny--model \(its prompt names: cites, document, query\)"):
        STEncoder(with_query_prompt(model, "citse"), model_path=folder, device="cpu")
    named = STEncoder(with_query_prompt(model, "cites"), model_path=folder, device="cpu")
    assert named.format("t", "a", query=True) == PROMPTS["cites"] + "t a"
    literal = STEncoder(with_query_prompt(model, "cites "), model_path=folder, device="cpu")
    assert literal.format("t", "a", query=True) == "cites t a"


def prompt_of_tokens(tokenizer, n: int) -> str:
    """A prompt of `n` tokens of `tokenizer` (without its special tokens): a word it holds
    whole, `n` times."""
    word = next(w for w in sorted(tokenizer.get_vocab()) if w.isalpha() and
                len(tokenizer(w, add_special_tokens=False)["input_ids"]) == 1)
    prompt = " ".join([word] * n) + " "
    assert len(tokenizer(prompt, add_special_tokens=False)["input_ids"]) == n
    return prompt


def test_a_prompt_that_leaves_the_query_too_few_tokens_is_refused_before_any_work(
        corpus_dir, folder, tmp_path):
    """An st: model of max_seq_length 128: a prompt leaving the query 32 tokens is taken, one
    leaving 31 is refused naming both lengths, before a paper is embedded or a run written
    (a longer one would cut every query's text away: every query the same vector)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    specials = len(tokenizer("")["input_ids"])
    model = get_model("st:tiny/model")
    fits = prompt_of_tokens(tokenizer, ST_LENGTH - 32 - specials)
    STEncoder(with_query_prompt(model, fits), model_path=folder, device="cpu")
    long = prompt_of_tokens(tokenizer, ST_LENGTH - 31 - specials)
    with pytest.raises(InputError, match=rf"QUERY_PROMPT is {ST_LENGTH - 31 - specials} tokens "
                       rf"of MODEL st--tiny--model, whose max_seq_length is {ST_LENGTH}: it "
                       r"leaves 31 tokens for a query's text, fewer than 32"):
        STEncoder(with_query_prompt(model, long), model_path=folder, device="cpu")
    corpus = copy_corpus(corpus_dir, tmp_path / "corpora" / "small")
    spec = PoolSpec(size=120, queries=4, seed=POOL_SEED)
    build_pool(corpus, spec)
    data = pipeline.Data(corpora=corpus.parent, indexes=tmp_path / "indexes",
                         runs=tmp_path / "runs")
    with pytest.raises(InputError, match=f"whose max_seq_length is {ST_LENGTH}"):
        pipeline.search(data, "small", spec.name, "st:tiny/model", k=50, threads=1,
                        model_path=folder, query_prompt=prompt_of_tokens(tokenizer, 600))
    assert not (tmp_path / "indexes").exists() and not (tmp_path / "runs").exists()


def test_a_long_prompt_on_an_hf_model_is_refused(tiny_bert):
    """The same room on an hf: (or registered dense) model: its max length, less [CLS] and
    [SEP], less the prompt, must leave 32 tokens."""
    from transformers import AutoTokenizer

    from pipeline.encoding.encoders import Encoder

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    entry = replace(get_model("hf:org/name"), max_length=128)
    with pytest.raises(InputError, match=r"QUERY_PROMPT is 100 tokens of MODEL "
                       r"hf--org--name--mean, whose max_seq_length is 128: it "
                       r"leaves 26 tokens"):
        Encoder(with_query_prompt(entry, prompt_of_tokens(tokenizer, 100)),
                model_path=tiny_bert, device="cpu")
    Encoder(with_query_prompt(entry, prompt_of_tokens(tokenizer, 94)), model_path=tiny_bert,
            device="cpu")


# ---- make ------------------------------------------------------------------------------------
def test_make_names_the_prompts_runs_and_passes_it_to_the_search_only(tmp_path):
    """make eval with QUERY_PROMPT: the search is given the prompt (quoted, `\\n` as written)
    and the tagged name, eval the tagged name alone; a model that encodes no text, and the
    goals that search several models, are refused before anything runs."""
    from tests.cli.test_make_hygiene import installed, make, refused

    root = tmp_path / "data"
    pool = root / "corpora" / "demo" / "pools" / "all-1k-r0"  # make eval needs a pool
    pool.mkdir(parents=True)
    (pool / "manifest.json").write_text("{}")
    done = make(root, "-n", "eval", "MODEL=hf:org/name", "POOLING=lasttoken",
                f"QUERY_PROMPT={INSTRUCTION}", *installed(tmp_path))
    assert done.returncode == 0, done.stderr
    tagged = f"hf--org--name--lasttoken+{prompt_tag(INSTRUCTION.replace(chr(92) + 'n', chr(10)))}"
    search, = (line for line in done.stdout.splitlines() if " search --" in line)
    evaluate, = (line for line in done.stdout.splitlines() if " eval --" in line)
    assert f"--model '{tagged}'" in search and f"--query-prompt '{INSTRUCTION}'" in search
    assert f"--model '{tagged}'" in evaluate and "--query-prompt" not in evaluate
    assert "bm25 is a bm25 model" in refused(make(root, "eval", "MODEL=bm25",
                                                  "QUERY_PROMPT=query: "))
    assert "not with make fuse" in refused(make(root, "fuse", "MODELS=bm25,minilm",
                                               "QUERY_PROMPT=query: "))
    # a one-word prompt: a name, refused where the model has none; with a trailing space, text
    assert "QUERY_PROMPT='cites '" in refused(make(root, "eval", "MODEL=minilm",
                                                   "QUERY_PROMPT=cites"))
    literal = make(root, "-n", "eval", "MODEL=minilm", "QUERY_PROMPT=cites ",
                   *installed(tmp_path))
    assert literal.returncode == 0, literal.stderr
    assert "--query-prompt 'cites '" in literal.stdout


def test_a_prompt_with_a_control_character_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(InputError, match="holds a control character"):
        pipeline.search(tmp_path, "demo", "all-1k-r0", "st:a/b", query_prompt="a\tb")
    assert not any(tmp_path.iterdir())


def test_the_docs_name_the_tag_of_their_example_instruction():
    """docs/encoders.md's example instruction and the tag it says the runs get agree."""
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "encoders.md").read_text()
    prompt = re.search(r"QUERY_PROMPT='([^']*)'", text).group(1)
    tags = set(re.findall(r"st--Qwen--Qwen3-Embedding-0\.6B\+(q[0-9a-f]{8})", text))
    entry = with_query_prompt(get_model("st:Qwen/Qwen3-Embedding-0.6B"), prompt)
    assert tags == {split_prompt_tag(entry.name)[1]}


@pytest.mark.parametrize("model, prompt", [("e5-base-v2", "query: "), ("st:org/name", "query")])
def test_the_models_own_query_prompt_is_the_model_itself(model, prompt, caplog):
    """QUERY_PROMPT=query for an st: model (sentence-transformers' encode_query prompt) or
    e5's own 'query: ' made a +q<tag> model: a second run and query cache of the same vectors
    (issue 57). It is the model itself, and a log line says so; another prompt is tagged."""
    import logging

    caplog.set_level(logging.INFO, logger="pipeline")
    entry = chosen_model(model, query_prompt=prompt)
    assert entry == get_model(model) and not split_prompt_tag(entry.name)[1]
    assert f"QUERY_PROMPT={prompt!r} is {entry.name}'s own query prompt" in caplog.text
    other = chosen_model(model, query_prompt="Represent the cited work: ")
    assert split_prompt_tag(other.name)[1] == prompt_tag("Represent the cited work: ")
