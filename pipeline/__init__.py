"""Large-scale evaluation pipeline for scientific document encoders (MDCR-style).

The Python API (docs/api.md), loaded on first use: `import pipeline` imports the standard
library only (`python3 -m pipeline check` runs before the virtual environment exists), and a
name's stages are imported when it is first used.

    data = pipeline.Data("data")  # corpora/, indexes/, runs/
    pipeline.build_corpus(data, "tiny", synthetic=8000)
    pool = pipeline.build_pool(data, "tiny", size=1000, queries=20)
    pipeline.search(data, "tiny", pool, "bm25")
    pipeline.evaluate(data, "tiny", pool, "bm25", means=True)
    pipeline.build_report(data, "tiny").save()
"""

from __future__ import annotations

from importlib import import_module
from inspect import isfunction
from typing import Any

# name -> the module that defines it (names that are not a submodule's: `pipeline.report` and
# `pipeline.verify` are packages of their own)
_API = {"Data": "pipeline.api", "build_corpus": "pipeline.api", "build_pool": "pipeline.api",
        "search": "pipeline.api", "embed": "pipeline.api", "evaluate": "pipeline.api",
        "build_report": "pipeline.api", "generate_corpus": "pipeline.api",
        "ingest_corpus": "pipeline.api", "prefilter_corpus": "pipeline.api",
        "build_pools": "pipeline.api", "build_paper_pools": "pipeline.api",
        "retire_pool": "pipeline.api", "training_ids": "pipeline.api",
        "download": "pipeline.api",
        "verify_data": "pipeline.api", "import_run": "pipeline.api",
        "list_models": "pipeline.api", "warm": "pipeline.api", "sweep": "pipeline.api",
        "import_collection": "pipeline.api", "export_beir": "pipeline.api",
        "import_beir": "pipeline.api", "import_csfcube": "pipeline.api",
        "import_mdcr": "pipeline.api", "export_mdcr": "pipeline.api",
        "export_mteb": "pipeline.api", "mteb_result": "pipeline.api",
        "crossover": "pipeline.api", "variance": "pipeline.api",
        "topic_set_size": "pipeline.api",
        "collect": "pipeline.api", "index": "pipeline.api", "submit_embed": "pipeline.api",
        "build_mdcr": "pipeline.api", "mdcr_jaccard": "pipeline.api",
        "mdcr_scores": "pipeline.api", "mdcr_evaluate": "pipeline.api",
        "score": "pipeline.evaluation.score", "compare": "pipeline.report.compare",
        "Comparison": "pipeline.report.compare",
        "Report": "pipeline.report.build",
        "Encoder": "pipeline.encoding.objects", "import_vectors": "pipeline.api",
        "inferred": "pipeline.judging.inferred", "judge": "pipeline.api",
        "judge_page": "pipeline.api", "judge_agreement": "pipeline.api"}
__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    if name in _API:
        value = getattr(import_module(_API[name]), name)
        if isfunction(value):  # every argument checked first: pipeline/options/arguments.py
            value = import_module("pipeline.options.arguments").validated(value)
        globals()[name] = value  # looked up once
        return value
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names only: not this module's helpers, nor the submodules loaded so far."""
    return list(__all__)
