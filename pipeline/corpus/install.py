"""A corpus written whole by one command (an MDCR-style benchmark, an imported collection):
the folder claimed before any work, and the finished corpus put in place, never over data that
the pipeline did not write."""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.core.atomic import is_temporary
from pipeline.core.checksums import CHECKSUMS
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.locks import is_lock
from pipeline.corpus.manifest import corpus_kind, corpus_sections
from pipeline.layout import MANIFEST, POOL_FILES, POOLS, PREFILTERED, pool_dir, pools_dir


def claim_corpus(corpus_dir: Path, command: str) -> str:
    """Refuse, before any work, to write a whole corpus (a benchmark, an imported collection)
    into a folder holding an ingested corpus, raw inputs or unknown files: never replaced, by
    any option. Returns the folder's kind (`absent`, `benchmark` or `collection`)."""
    kind = corpus_kind(corpus_dir)
    if kind in ("ingested", "other"):
        what = ("an ingested corpus (and maybe its raw inputs)" if kind == "ingested"
                else "files of its own")
        raise InputError(f"{corpus_dir} holds {what}: {command} writes a whole corpus and "
                         "would replace it; give a new corpus name (CORPUS=... or MDCR=...)")
    return kind


def _pool_shas(corpus_dir: Path, on_disk: bool = False) -> dict[str, dict | None]:
    """pool -> {file: sha256} as each pool's manifest records it (None for a damaged manifest),
    or (`on_disk`) as the files now hold it (None for a missing file)."""
    from pipeline.core.checksums import file_sha256

    found: dict[str, dict | None] = {}
    for path in sorted(pools_dir(corpus_dir).glob(f"*/{MANIFEST}")):
        try:
            recorded = read_json(path).get("outputs", {})
        except InputError:  # damaged: put back, never taken for other contents
            found[path.parent.name] = {} if on_disk else None
            continue
        found[path.parent.name] = {
            n: ((file_sha256(path.parent / n) if (path.parent / n).is_file() else None)
                if on_disk else f.get("sha256")) for n, f in recorded.items()}
    return found


def _bookkeeping(path: Path) -> bool:
    """The pipeline's own locks, checksum cache and temporaries: never a user's data."""
    return is_lock(path) or is_temporary(path) or path.name.startswith(CHECKSUMS)


def foreign_files(corpus_dir: Path, section: str) -> list[str]:
    """The paths (relative to `corpus_dir`, sorted; a folder with a trailing `/`) that the
    command which wrote the corpus whole did not write, hidden ones too: what its manifest
    does not list (its manifest, `prefiltered.parquet`, and each listed pool's manifest and
    files), less the pipeline's bookkeeping. A replace or repair never removes them."""
    listed = corpus_sections(corpus_dir).get(section, {}).get("pools", [])
    own_dirs = {POOLS, *(f"{POOLS}/{p}" for p in listed)}
    own = {MANIFEST, PREFILTERED, *(f"{POOLS}/{p}/{n}" for p in listed
                                    for n in (MANIFEST, *POOL_FILES))}
    found = []
    for top, dirs, files in os.walk(corpus_dir):
        here = Path(top).relative_to(corpus_dir)
        for name in sorted(dirs):  # a folder of ours is walked, any other named whole
            rel = (here / name).as_posix()
            if rel not in own_dirs and not _bookkeeping(Path(name)):
                found.append(f"{rel}/")
        dirs[:] = [d for d in dirs if (here / d).as_posix() in own_dirs]
        found += [rel for name in files if (rel := (here / name).as_posix()) not in own
                  and not _bookkeeping(Path(name))]
    return sorted(found)


def _foreign_refusal(corpus_dir: Path, foreign: list[str], action: str) -> InputError:
    """The one line refusing `action` (replacing or repairing a corpus written whole) over a
    folder holding `foreign` files (`foreign_files`), naming the first."""
    more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
    return InputError(f"{corpus_dir} holds {foreign[0]}{more}, which no import wrote: "
                      f"{action} would remove it; move it out of {corpus_dir.name}/ first, or "
                      "give a new corpus name (nothing was changed)")


def _link_refusal(corpus_dir: Path) -> str:
    return (f"{corpus_dir} is a symbolic link (to {os.readlink(corpus_dir)}): an import writes "
            "the corpus as a new folder and will not replace your link; put the data folder on "
            "that disk instead (DATA=<folder holding corpora/>), or remove the link")


def install_corpus(built: Path, corpus_dir: Path, derived: list[Path], replace: bool,
                   section: str) -> str:
    """Put a corpus written whole in `built` (a temporary folder beside `corpus_dir`) in place.

    - no corpus there: `built` becomes it ("new");
    - the same papers and pools: nothing changes ("unchanged"), but a pool whose files no
      longer hold what its manifest records (damaged), or a damaged prefiltered.parquet, is
      put back from `built` ("repaired"), so that what was made from it stays current;
    - the same papers, and pools that are new to it (another split of a collection): those
      pools are added ("added");
    - anything else differs: refused, unless `replace`, when the old corpus and what was
      derived from it (`derived`: its indexes and runs, written by us) are removed ("replaced").

    A file in the folder that the old corpus's manifest does not list (`foreign_files`: a
    user's notes) refuses a replace, and the repair or addition of the pool folder holding it,
    naming it: only what an import wrote is ever removed.
    """
    from pipeline.core.atomic import atomic_dir, remove
    from pipeline.core.checksums import file_sha256

    link = corpus_dir.is_symlink()
    if corpus_kind(corpus_dir) == "absent":
        if link:  # a user's link (to a scratch disk): never replaced by a local folder
            raise InputError(_link_refusal(corpus_dir))
        remove(corpus_dir)
        os.replace(built, corpus_dir)
        return "new"
    old_papers = corpus_dir / PREFILTERED
    # the papers its manifest vouches for (the file itself may be damaged since)
    recorded = corpus_sections(corpus_dir).get(section, {}).get("outputs", {}).get(
        PREFILTERED, {}).get("sha256")
    papers_now = file_sha256(old_papers) if old_papers.is_file() else None
    same_papers = (recorded or papers_now) == file_sha256(built / PREFILTERED)
    damaged_papers = same_papers and papers_now != recorded
    old_pools, new_pools = _pool_shas(corpus_dir), _pool_shas(built)
    clashes = [p for p in new_pools if old_pools.get(p) not in (None, new_pools[p])]
    foreign = foreign_files(corpus_dir, section)
    if same_papers and not clashes:
        added = [p for p in new_pools if p not in old_pools]
        on_disk = _pool_shas(corpus_dir, on_disk=True)
        damaged = [p for p in new_pools if p in old_pools and on_disk[p] != old_pools[p]]
        for name in [*added, *damaged]:  # each pool folder is replaced whole
            inside = [f for f in foreign if f.startswith(f"{POOLS}/{name}/")]
            if inside:
                raise _foreign_refusal(corpus_dir, inside, f"writing pool {name}")
        for name in [*added, *damaged]:
            with atomic_dir(pool_dir(corpus_dir, name)) as tmp:
                remove(tmp)
                os.replace(pool_dir(built, name), tmp)
        if damaged_papers:  # the same bytes as recorded, put back in one rename
            os.replace(built / PREFILTERED, old_papers)
        if added:
            sections = corpus_sections(corpus_dir)
            merged = read_json(built / MANIFEST)[section]
            merged["pools"] = sorted({*sections.get(section, {}).get("pools", []),
                                      *merged.get("pools", [])})
            write_json({**sections, section: merged}, corpus_dir / MANIFEST)
        return "added" if added else "repaired" if damaged or damaged_papers else "unchanged"
    if link:
        raise InputError(_link_refusal(corpus_dir))
    if foreign:
        raise _foreign_refusal(corpus_dir, foreign, "replacing its corpus (REPLACE=1)")
    if not replace:
        what = "other papers"
        if same_papers:  # a pool's file differs: named
            old, new = old_pools[clashes[0]] or {}, new_pools[clashes[0]]
            file = next(n for n in sorted({*old, *new}) if old.get(n) != new.get(n))
            what = f"other contents in {POOLS}/{clashes[0]}/{file}"
        raise InputError(f"{corpus_dir} already holds a corpus with {what}: add REPLACE=1 "
                         "(--replace) to replace it and remove its indexes and runs, or give "
                         "a new corpus name")
    with atomic_dir(corpus_dir) as tmp:
        remove(tmp)
        os.replace(built, tmp)
    for folder in derived:
        remove(folder)
    return "replaced"


