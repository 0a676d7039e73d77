"""The corpus commands: synthetic shards, ingest, prefilter, and all three in one process, each
the API function of its stage (command_of)."""

from __future__ import annotations

from pipeline import api
from pipeline.cli.registry import arg, command_of, flag, like
from pipeline.layout import MAX_SYNTHETIC_SHARDS, format_size
from pipeline.options.checks import given_path, non_negative, synth_shard_count, synthetic_size

# the options of ingest, and of corpus, which ingests
INGEST = (arg("--raw", type=given_path, help="S2ORC folder holding metadata/, or S2AG folder "
              "holding papers/, abstracts/, citations/ (default corpora/<corpus>/<source>)"),
          like("SOURCE", default=None),  # not given: the corpus's recorded one (api._source)
          like("THREADS", help="processes reading shards in parallel (the "
               "output does not change)"))


class NewCorpus(str):
    """A help text naming the generator's setting for a new corpus, SyntheticConfig's ({papers},
    {shards}, {seed}), filled in when --help shows it (argparse expands a help with `%`): the
    generator, which loads numpy, is not imported before."""

    def __mod__(self, params: object) -> str:
        from pipeline.ingest.synthetic import SyntheticConfig

        new = SyntheticConfig()
        return str.__mod__(self.format(papers=format_size(new.n_papers), shards=new.n_shards,
                                       seed=new.seed), params)


def made(what: str, setting: str, more: str = "") -> NewCorpus:
    """The help of a synthetic setting, which is as the corpus was made when not given."""
    return NewCorpus(f"{what} (default: as the corpus was made; {{{setting}}} for a new "
                     f"one{more})")


command_of(api.generate_corpus, "synth", "generate a synthetic corpus in S2ORC format",
           arg("--papers", type=synthetic_size, help=made("papers", "papers")),
           arg("--shards", type=synth_shard_count,
               help=made("shards", "shards", f"; at most {MAX_SYNTHETIC_SHARDS}")),
           flag("--repair", "write damaged or missing shards again, with the settings the "
                "corpus's s2orc/manifest.json records"),
           arg("--seed", type=non_negative, help=made("seed", "seed")),
           like("THREADS", help="processes rendering text"),
           writes=("corpora", "times"))
command_of(api.ingest_corpus, "ingest", "S2ORC / S2AG shards -> papers.parquet + "
           "citations.parquet", *INGEST, writes=("corpora", "times"))
command_of(api.prefilter_corpus, "prefilter", "MDCR §3 prefilter with drop counts",
           writes=("corpora", "times"))
command_of(api.build_corpus, "corpus", "synth (with --synth), ingest and prefilter in one "
           "process, each only when its outputs are not current (make corpus)", *INGEST,
           arg("--synth", nargs="?", const="", type=lambda text: text and synthetic_size(text),
               help=NewCorpus("first generate a synthetic corpus in corpora/<corpus>/s2orc "
                              "(the demo) of this many papers; without a number: as the corpus "
                              "was made; {papers} for a new one")),
           arg("--synth-seed", type=non_negative, help=made("its seed", "seed")),
           writes=("corpora", "times"),  # shards: Python's alone (none: as made)
           from_args={"synthetic": "synth", "seed": "synth_seed",
                      "shards": ""})
