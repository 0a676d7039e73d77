"""Secrets in settings: API keys read from the environment (OPENAI_API_KEY, S2_API_KEY) and
URLs that may carry credentials (EMBEDDINGS_URL, S2_API_URL). A key is checked before it goes
into a request's header, and a URL is shown with its secret parts replaced, so that no
message, log line, manifest or report ever holds a secret (docs/errors.md, "Secrets")."""

from __future__ import annotations

import codecs
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
Secrets = str | tuple[str, ...] | None  # the key, or every secret a request carried


def _each(key: Secrets) -> list[str]:
    """The secrets of `key`, one or several, the empty ones left out."""
    return [k for k in ((key,) if isinstance(key, str) else key or ()) if k]


def decoded(data: bytes) -> str:
    """A server's bytes as text: by their byte-order mark (UTF-8, UTF-16, UTF-32), else as
    UTF-16 when every other byte is NUL (a body without a mark), else UTF-8; what does not
    decode is replaced, never dropped silently."""
    for mark, codec in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                        (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
                        (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(mark):
            return data.decode(codec, errors="replace")
    head = data[:512]
    if len(head) >= 4 and len(head) % 2 == 0:
        if head[1::2].count(0) == len(head) // 2 and head[0::2].count(0) < len(head) // 4:
            return data.decode("utf-16-le", errors="replace")
        if head[0::2].count(0) == len(head) // 2 and head[1::2].count(0) < len(head) // 4:
            return data.decode("utf-16-be", errors="replace")
    return data.decode(errors="replace")


def key_forms(key: str) -> list[str]:
    """The forms a server may echo `key` in: as sent, JSON-escaped (with '/' as '\\/' too),
    percent-encoded and HTML-escaped; the longest first."""
    escaped = json.dumps(key)[1:-1]
    forms = {key, escaped, escaped.replace("/", "\\/"), quote(key, safe=""),
             quote_plus(key, safe=""), html.escape(key)}
    return sorted(forms, key=len, reverse=True)


def holds_secret(text: str, key: Secrets) -> bool:
    """Whether `text` holds a whole secret of `key` (one or several) in any form a server may
    write it in (key_forms), in any case, its percent-encoding undone or not: a value that
    would name a file or a folder (where no redaction reaches) is refused by it."""
    folded = f"{text}\n{unquote(text)}".casefold()
    return any(form.casefold() in folded for one in _each(key) for form in key_forms(one))


def redacted(text: str, key: Secrets, most: int | None = None) -> str:
    """`text`, a server's (an error, a reply), as a message, log line or file may hold it:
    invisible characters dropped (UNSEEN), every layer a server can wrap a key in undone where
    that shows a piece of it (`_unwrapped`: percent-encoding, HTML references named and
    numeric, JSON and Python escapes), each URL's credentials and query replaced (shown_url),
    and the key (or each of several secrets), in each of its forms (key_forms) and any case,
    replaced by HIDDEN in the whole text; with `most`, its whitespace is then collapsed and the
    line cut to `most` characters; last, every run of FRAGMENT or more characters of a key (a
    server that cut or masked it, a key across a line break) is replaced by HIDDEN too. A key
    is thus never half shown, wherever a cut falls."""
    keys = _each(key)
    text = UNSEEN.sub("", text)
    if keys:
        text = _unwrapped(text, keys)
    text = URL.sub(lambda url: shown_url(url.group()), text)
    for one in keys:
        for form in key_forms(one):
            text = re.sub(re.escape(form), HIDDEN, text, flags=re.IGNORECASE)
    if most is not None:
        text = one_line(text, most)
    for one in keys:
        text = _fragments_hidden(text, one)
    return text


# what a server may wrap a key's characters in: percent-encoding (%73), HTML references
# (&amp; &#115; &#x73;, the ';' optional as browsers read them), JSON's and Python's escapes
# (\u0073, \x73, \U00000073)
ESCAPES = re.compile(r"%[0-9a-fA-F]{2}"
                     r"|&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?"
                     r"|\\(?:u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|U[0-9a-fA-F]{8})")
BACKSLASHED = re.compile(r"\\(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2})|U([0-9a-fA-F]{8}))")
UNESCAPE_ROUNDS = 4  # escapes of escapes (%2573, &amp;#115;) undone this many times at most


def _unbackslashed(text: str) -> str:
    """`text` with its \\uXXXX, \\xXX and \\UXXXXXXXX escapes undone (a surrogate pair joined;
    a code no character has left as written)."""
    def one(code: re.Match) -> str:
        value = int(next(group for group in code.groups() if group), 16)
        return chr(value) if value <= 0x10FFFF else code.group()

    plain = BACKSLASHED.sub(one, text)
    return plain.encode("utf-16", "surrogatepass").decode("utf-16", "replace") \
        if re.search("[\ud800-\udfff]", plain) else plain


def _unwrapped(text: str, keys: list[str]) -> str:
    """`text` with every escape layer undone (ESCAPES, up to UNESCAPE_ROUNDS times, what nothing
    shows dropped: UNSEEN) when that shows FRAGMENT characters of a key in a row (a key escaped
    character by character, as a redirect's Location, an HTML page or a JSON encoder may write
    it), so that it is replaced as written plainly; `text` itself otherwise."""
    pieces = {key[i:i + FRAGMENT].casefold() for key in keys
              for i in range(len(key) - FRAGMENT + 1)}
    plain = text
    for _ in range(UNESCAPE_ROUNDS):
        if not ESCAPES.search(plain):
            break
        plain = UNSEEN.sub("", unquote(html.unescape(_unbackslashed(plain))))
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
