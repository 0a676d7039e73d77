"""Secrets in settings: API keys read from the environment (OPENAI_API_KEY, S2_API_KEY) and
URLs that may carry credentials (EMBEDDINGS_URL, S2_API_URL). A key is checked before it goes
into a request's header, and a URL is shown with its secret parts replaced, so that no
message, log line, manifest or report ever holds a secret (docs/errors.md, "Secrets")."""

from __future__ import annotations

import unicodedata

from pipeline.core.errors import InputError


def shown_url(url: str) -> str:
    """`url` as a message may show it: a user and password replaced by `<user:password>@`, a
    query by `?<query>`, a fragment by `#<fragment>` (where keys and tokens hide). Whatever
    comes before the last '@' of the URL's part after its scheme counts as credentials, so a
    malformed URL is never shown with its password."""
    before_fragment, hashed, _ = url.partition("#")
    base, asked, _ = before_fragment.partition("?")
    scheme, sep, rest = base.partition("://")
    head = scheme + sep if sep else ""
    rest = rest if sep else base
    if "@" in rest:
        rest = "<user:password>@" + rest.rpartition("@")[2]
    return head + rest + ("?<query>" if asked else "") + ("#<fragment>" if hashed else "")


def header_secret(variable: str, value: str | None) -> str | None:
    """The key in environment variable `variable`, its surrounding whitespace stripped (a key
    file saved with a line end, `export KEY=$(cat key.txt)`); None when it is empty. A key
    that cannot be an HTTP header's value is refused in one line naming the variable and the
    character's kind and place, never the key: a request would fail with the key in its
    error."""
    key = (value or "").strip()
    for place, char in enumerate(key, 1):
        if char.isspace():
            kind = "a space or a line break"
        elif unicodedata.category(char) in ("Cc", "Cf"):
            kind = "a control character"
        elif not char.isascii():
            kind = "a letter that is not ASCII"
        else:
            continue
        raise InputError(f"{variable} holds {kind} (character {place}; the key is not shown): "
                         "set it to the key alone, as its provider gave it")
    return key or None
