"""Secrets in settings: API keys read from the environment (OPENAI_API_KEY, S2_API_KEY) and
URLs that may carry credentials (EMBEDDINGS_URL, S2_API_URL). A key is checked before it goes
into a request's header, and a URL is shown with its secret parts replaced, so that no
message, log line, manifest or report ever holds a secret (docs/errors.md, "Secrets")."""

from __future__ import annotations

import html
import json
import re
import unicodedata
from urllib.parse import quote, quote_plus, unquote

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


# ---- a server's text: what it echoes of a request's secrets, replaced before it is shown
HIDDEN = "<key>"  # what stands for the key, or for any part of it, in what is shown
FRAGMENT = 4  # characters of the key in a row that a text shown never holds
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s\"'<>]+", re.IGNORECASE)  # shown as shown_url's
# the characters nothing shows (controls but whitespace, the format characters texts carry:
# zero-width spaces and joiners, direction marks, the byte-order mark, tags): dropped, so that
# no key is echoed hidden between them (a UTF-16 text's NULs)
UNSEEN = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f"
                    "\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
                    "\ufff9-\ufffb\U000e0001-\U000e007f]")


def key_forms(key: str) -> list[str]:
    """The forms a server may echo `key` in: as sent, JSON-escaped (with '/' as '\\/' too),
    percent-encoded and HTML-escaped; the longest first."""
    escaped = json.dumps(key)[1:-1]
    forms = {key, escaped, escaped.replace("/", "\\/"), quote(key, safe=""),
             quote_plus(key, safe=""), html.escape(key)}
    return sorted(forms, key=len, reverse=True)


def redacted(text: str, key: str | None, most: int | None = None) -> str:
    """`text`, a server's (an error, a reply), as a message, log line or file may hold it:
    invisible characters dropped (UNSEEN), each URL's credentials and query replaced
    (shown_url), and the key, in each of its forms (key_forms) and any case, replaced by
    HIDDEN in the whole text; with `most`, its whitespace is then collapsed and the line cut
    to `most` characters; last, every run of FRAGMENT or more characters of the key (a server
    that cut or masked it, a key across a line break) is replaced by HIDDEN too. A key is
    thus never half shown, wherever a cut falls."""
    text = UNSEEN.sub("", text)
    if key:
        text = _unescaped_if_holding(text, key)
    text = URL.sub(lambda url: shown_url(url.group()), text)
    if key:
        for form in key_forms(key):
            text = re.sub(re.escape(form), HIDDEN, text, flags=re.IGNORECASE)
    if most is not None:
        text = one_line(text, most)
    return _fragments_hidden(text, key) if key else text


ESCAPES = re.compile(r"%[0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}")  # percent and JSON's \uXXXX
UNESCAPE_ROUNDS = 3  # escapes of escapes (%2573) undone this many times at most


def _unescaped_if_holding(text: str, key: str) -> str:
    """`text` with its percent and `\\uXXXX` escapes undone (up to UNESCAPE_ROUNDS times, what
    nothing shows dropped: UNSEEN) when that shows FRAGMENT characters of the key in a row (a
    key escaped byte by byte, as a redirect's Location or a JSON encoder may write it), so
    that it is replaced as written plainly; `text` itself otherwise."""
    pieces = {key[i:i + FRAGMENT].casefold() for i in range(len(key) - FRAGMENT + 1)}
    plain = text
    for _ in range(UNESCAPE_ROUNDS):
        if not ESCAPES.search(plain):
            break
        plain = UNSEEN.sub("", unquote(re.sub(r"\\u([0-9a-fA-F]{4})",
                                              lambda code: chr(int(code.group(1), 16)), plain)))
        folded = plain.casefold()
        if any(piece in folded for piece in pieces):
            return plain
    return text


def one_line(text: str, most: int) -> str:
    """`text`'s first `most` characters once its whitespace is collapsed, read no further
    into it than those (a long reply costs no more than its line)."""
    words: list[str] = []
    size = 0
    for word in re.finditer(r"\S+", text):
        words.append(word.group())
        size += len(words[-1]) + 1
        if size > most:
            break
    return " ".join(words)[:most]


def _fragments_hidden(text: str, key: str) -> str:
    """`text` with each run of characters that FRAGMENT-character pieces of the key (of any of
    its forms, in any case) cover replaced by HIDDEN."""
    pieces = {form[i:i + FRAGMENT].casefold() for form in key_forms(key)
              for i in range(len(form) - FRAGMENT + 1)}
    folded = text.casefold() if len(text.casefold()) == len(text) else None
    runs: list[list[int]] = []  # [start, end) of each covered run
    for i in range(len(text) - FRAGMENT + 1) if pieces else ():
        window = folded[i:i + FRAGMENT] if folded is not None else \
            text[i:i + FRAGMENT].casefold()
        if window in pieces:
            if runs and runs[-1][1] >= i:
                runs[-1][1] = i + FRAGMENT
            else:
                runs.append([i, i + FRAGMENT])
    out, shown = [], 0
    for start, end in runs:
        out += [text[shown:start], HIDDEN]
        shown = end
    return "".join(out) + text[shown:]
