"""`make setup`'s last step (the warm command): every numba kernel a BM25 search and an eval
stage use, compiled once or loaded from numba's cache, and the pipeline's modules compiled to
bytecode, so that a fresh job pays neither (docs/cluster.md). The lowest layer that sees both
the BM25 engine's kernels and the metrics'."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from pipeline import metrics
from pipeline.retrieval.bm25 import store as bm25_store

log = logging.getLogger(__name__)
PACKAGE = Path(__file__).resolve().parents[1]  # the pipeline's folder


def warm() -> dict[str, Any]:
    """The kernels ready and the bytecode written, a line logged for each (a warning for
    kernels cached nowhere). Returns kernels, compiled, caches, seconds and modules (None: not
    every module's bytecode could be written)."""
    start = time.perf_counter()
    with metrics.compilations() as compiled:
        bm25_store.warm_up()
        metrics.warm_up()
    seconds = time.perf_counter() - start
    caches = metrics.kernel_caches()
    kept = {folder: n for folder, n in caches.items() if folder}
    nowhere = caches.get("", 0)
    said = ", ".join(f"{folder} ({n})" for folder, n in sorted(kept.items()))
    log.info(f"[warm] numba: {sum(caches.values())} kernels ready in {seconds:.1f}s "
             f"({len(compiled)} functions compiled, the others loaded from its cache); cached "
             f"in {said or 'no folder'}")
    if nowhere:
        log.warning(f"[warm] numba: {nowhere} kernels cached nowhere (no writable folder): "
                    "each process compiles them again; set NUMBA_CACHE_DIR to a folder you "
                    "can write (docs/cluster.md)")
    modules = bytecode()
    log.info("[warm] bytecode: " + (
        f"{modules} module{'' if modules == 1 else 's'} of {PACKAGE} compiled, the others "
        "current" if modules is not None else f"not every module of {PACKAGE} could be "
        "written (a read-only checkout? PYTHONPYCACHEPREFIX names a folder to write it in)"))
    return {"kernels": sum(caches.values()), "compiled": list(compiled), "caches": caches,
            "seconds": seconds, "modules": modules}


def bytecode() -> int | None:
    """The pipeline's modules compiled to bytecode, the current ones skipped: how many were
    compiled (None: not every one could be written)."""
    import compileall
    import io
    from contextlib import redirect_stdout

    with redirect_stdout(io.StringIO()) as said:
        done = compileall.compile_dir(PACKAGE, quiet=0, workers=1)
    return said.getvalue().count("Compiling ") if done else None
