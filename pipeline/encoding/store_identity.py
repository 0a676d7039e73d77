"""Whether a store's vectors are the model's: the model identity the store recorded
(identity.py) against the model's now, or a served model's probe answers; a store of another
model under the same name refused in one line, or with REPLACE=1 removed with the runs made
from it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pipeline.core.atomic import remove
from pipeline.core.errors import InputError
from pipeline.core.files import read_json, write_json
from pipeline.core.locks import file_lock
from pipeline.core.repair import Repair
from pipeline.encoding.encoder_kinds import encoder_class, encoder_kind
from pipeline.encoding.families import routed
from pipeline.encoding.identity import identity_change, model_identity
from pipeline.encoding.objects import known_model
from pipeline.encoding.store import store_repair
from pipeline.encoding.writer import MODEL_PATH_KEY
from pipeline.layout import MANIFEST, Place, model_digests_path, run_paths, store_dir
from pipeline.models import (
    API_BATCH,
    API_CONCURRENCY,
    API_DEFAULTS,
    API_URL,
    ModelEntry,
    ServedModel,
    get_model,
)

log = logging.getLogger(__name__)


MODEL_IDENTITY = "model_identity"  # the store config's key of the model's identity
LEGACY_CONFIG_DIGEST = "st_config"  # what st: stores recorded before: their JSON files only


def identity_of(place: Place, entry: ModelEntry, model_path: str | Path | None) -> dict:
    """The identity of the model `entry` loaded from `model_path` (identity.model_identity),
    each file hashed only when its stat changed since the data folder's stat cache saw it."""
    return model_identity(entry, model_path, cache=model_digests_path(place.index_root))


def changed_identity(place: Place, store: Path, entry: ModelEntry,
                     model_path: str | Path | None) -> str | None:
    """What differs between the model identity the store recorded and the model's now (in
    words), None when they agree or either is unknown: a store from before identities were
    recorded (adopted at its next embed: `adopt_identity`), a hub model not in the cache."""
    path = store / MANIFEST
    if not path.exists() or not entry.embedded:
        return None
    config = read_json(path, store_repair(store)).get("config", {})
    if encoder_kind(entry.kind).own_identity:  # a served model: its endpoint's URL (served.py)
        return encoder_class(entry.kind).identity_change(config, entry)
    made = config.get(MODEL_IDENTITY)
    if not made:
        return None
    return identity_change(made, identity_of(place, entry, model_path))


def recorded_model_change(store: Path, index_root: Path) -> str | None:
    """What changed in the model a store was embedded by, since, as its manifest alone tells:
    its model identity now, from the MODEL_PATH the manifest records, else the model's package
    or hub cache (the stat cache, nothing loaded). None when nothing did, or it cannot be said
    (no identity recorded, a model of the user's, a folder gone: said in the log). What verify
    calls STALE and what collect and the report leave out."""
    try:
        info = read_json(store / MANIFEST)
        made = info.get("config", {}).get(MODEL_IDENTITY)
        if not made or not known_model(store.name):
            return None
        entry = routed(get_model(store.name), info.get(MODEL_PATH_KEY))
        now = model_identity(entry, info.get(MODEL_PATH_KEY),
                             cache=model_digests_path(index_root), save=False)
    except (InputError, OSError) as exc:
        log.info(f"[check] {store}: its model cannot be checked now ({exc}); not a problem")
        return None
    return identity_change(made, now)


def probe_change(store: Path, encoder) -> str | None:
    """What differs between the model that embedded a store and the loaded one as only its
    answers tell (a served model's probe vectors: served.py), in words; None for a new store
    or an encoder that has nothing to compare."""
    check = getattr(encoder, "probe_change", None)
    if check is None or not (store / MANIFEST).exists():
        return None
    return check(read_json(store / MANIFEST, store_repair(store)).get("config", {}))


def model_variables(entry: ModelEntry,
                    model_path: str | Path | None) -> tuple[tuple[str, str], ...]:
    """The make variables, beyond MODEL, that load `entry` as this run did, for a repair's
    command to run as printed: MODEL_PATH where given; a served model's EMBEDDINGS_URL (as
    recorded: models.endpoint_url refuses one holding a secret) and its request settings
    given otherwise than their defaults (never the key: OPENAI_API_KEY stays in the
    environment); a query prompt's QUERY_PROMPT (a line break written \\n, as make takes it)."""
    found = [] if model_path is None else [("MODEL_PATH", str(model_path))]
    if isinstance(entry, ServedModel) and entry.endpoint:
        sizes = {API_BATCH: entry.batch_size, API_CONCURRENCY: entry.concurrency}
        found += [(API_URL, entry.endpoint), *((name, str(size)) for name, size in sizes.items()
                                              if size != API_DEFAULTS[name])]
    if entry.query_prompt:
        found.append(("QUERY_PROMPT", entry.query_prompt.replace("\n", "\\n")))
    return tuple(found)


def replace_repair(corpus: str, entry: ModelEntry,
                   model_path: str | Path | None) -> Repair:
    """`make eval ... REPLACE=1` for `entry` loaded as this run did (`model_variables`)."""
    return Repair("eval", corpus, entry.name, (*model_variables(entry, model_path),
                                               ("REPLACE", "1")))


def identity_refusal(place: Place, store: Path, entry: ModelEntry, change: str,
                     model_path: str | Path | None, how: str = "embed again with REPLACE=1",
                     repair: Repair | None = None) -> InputError:
    """The one line refusing a store embedded from another model under the same name; `how`
    and `repair` say the repair in the caller's words (default make's: `make eval ...
    REPLACE=1` with the variables the model needs, `replace_repair`; the Python API's
    replace=True, a SLURM array's EXECUTOR=slurm)."""
    return InputError(
        f"{store} was embedded by another model named {entry.name} ({change}): its vectors "
        f"are not this model's; give this model another name, or {how} "
        "(removes that store and the runs made from it)",
        repair or replace_repair(place.corpus, entry, model_path))


def check_identity(place: Place, entry: ModelEntry, model_path: str | Path | None = None,
                   replace: bool = False, **words: Any) -> dict[str, int]:
    """Refuse the model's store when it was embedded by another model (another identity,
    under the same name), before any run made from it is kept as current; with `replace`
    (REPLACE=1) remove that store and the runs made from it instead, so that they are made
    again. What was removed. `words`: the refusal's `how` and `repair` (identity_refusal)."""
    store = store_dir(place.index_root, place.corpus, entry.name)
    change = changed_identity(place, store, entry, model_path)
    if change is None:
        return {}
    if not replace:
        raise identity_refusal(place, store, entry, change, model_path, **words)
    with file_lock(store):
        return replace_store(place, store, entry, change)


def replace_store(place: Place, store: Path, entry: ModelEntry, change: str) -> dict[str, int]:
    """REPLACE=1 on a store of another model: remove the runs that searched it (their
    evaluations with them; what search wrote, never an imported run) and the store, which
    embed wrote, so that both are made again with the model as it is now."""
    label = place.roots.label(store) + "/"
    removed = 0
    for manifest_path in sorted(place.runs_dir.glob(f"*/*.{MANIFEST}")):
        try:
            info = read_json(manifest_path)
        except InputError:
            continue
        if info.get("stage") == "search" and any(
                str(name).startswith(label) for name in info.get("inputs", {})):
            stem = manifest_path.name.removesuffix(f".{MANIFEST}")
            paths = run_paths(place.runs_root, place.corpus, manifest_path.parent.name, stem)
            for path in (paths.manifest, *paths):  # the manifest that vouches first
                path.unlink(missing_ok=True)
            removed += 1
    remove(store)
    log.info(f"[embed] REPLACE=1: {store} was embedded by another model named {entry.name} "
             f"({change}): removed with the {removed} runs made from it, to be made again")
    return {"replaced_store": 1, "runs_removed": removed}


def adopt_identity(place: Place, store: Path, entry: ModelEntry,
                    model_path: str | Path | None) -> None:
    """A store made before stores recorded their model's identity takes the model's identity
    now, once, with a line saying so (its vectors are trusted to be this model's: REPLACE=1
    embeds them again); its former digest of the JSON files alone is dropped."""
    info = read_json(store / MANIFEST, store_repair(store))
    config = info.get("config", {})
    if MODEL_IDENTITY in config or config.get("imported") is not None:
        return
    identity = identity_of(place, entry, model_path)
    if not identity:
        return
    config = {k: v for k, v in config.items() if k != LEGACY_CONFIG_DIGEST}
    write_json({**info, "config": {**config, MODEL_IDENTITY: identity}}, store / MANIFEST)
    log.info(f"[embed] {store} recorded no model identity (made before they were): it takes "
             f"the model's now, weights digest {identity['sha256'][:8]}... (if its vectors "
             "were made from other weights, embed again with REPLACE=1)")
