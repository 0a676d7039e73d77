"""The encoder of each embedded kind: its class, imported only when a model is embedded, and
the hooks of that class its ENCODERS entry (pipeline/models.py) says, asked without importing
it (a store's settings, a served model's own identity)."""

from __future__ import annotations

from importlib import import_module

from pipeline.core.errors import InputError
from pipeline.models import ENCODERS, EncoderKind, ModelEntry

# What a kind outside ENCODERS (an imported store's: pipeline/encoding/vectors.py) is asked:
# no hook of an encoder class
_NO_HOOKS = EncoderKind("")


def encoder_kind(kind: str) -> EncoderKind:
    """The registry entry of `kind`'s encoder (pipeline/models.py, ENCODERS), whose fields say
    which hooks of its class the embed stage asks without importing it."""
    return ENCODERS.get(kind, _NO_HOOKS)


def encoder_class(kind: str):
    """The class that embeds models of `kind` (imported now), checked against its entry."""
    if kind not in ENCODERS:
        raise InputError(f"models of kind {kind!r} are not embedded: no encoder is registered "
                         "for it in pipeline/models.py (ENCODERS)")
    module, _, name = ENCODERS[kind].encoder.partition(":")
    cls = getattr(import_module(module), name)
    _check_hooks(kind, cls)
    return cls


def _check_hooks(kind: str, cls: type) -> None:
    """Refuse an encoder class whose hooks its ENCODERS entry does not say (or says and it
    lacks): they are asked by the entry alone, so an unsaid one would be skipped in silence
    (a served store's endpoint unchecked, a sentence column not in the store's settings)."""
    said, wrong = ENCODERS[kind], []
    if hasattr(cls, "identity_change") != said.own_identity:
        wrong.append(f"own_identity={not said.own_identity}")
    if getattr(cls, "columns", ()) and not said.adds_settings:
        wrong.append("adds_settings=True")
    if wrong:
        raise TypeError(f"the encoder of kind {kind!r} ({said.encoder}) needs "
                        f"{', '.join(wrong)} in its ENCODERS entry (pipeline/models.py)")


class PlainSettings:
    """What the encoder class of a kind without `adds_settings` says of a store's settings:
    nothing beyond the entry (the base Encoder's), known without importing it."""

    columns: tuple[str, ...] = ()

    @classmethod
    def config_for(cls, entry: ModelEntry, columns: list[str]) -> dict:
        return {}


def settings_class(kind: str):
    """The class whose `config_for` and `columns` give a store's settings for `kind`."""
    return encoder_class(kind) if encoder_kind(kind).adds_settings else PlainSettings


def loaded_settings(encoder) -> dict:
    """What a loaded encoder adds to its store's config (Encoder.settings: an st: folder's
    configuration and prompts, last-token pooling's EOS); an object's encoder adds nothing."""
    return getattr(encoder, "settings", dict)()
