"""Secrets in settings (pipeline/core/secrets.py): keys checked before a header carries them,
URLs shown without their credentials, query or fragment; the S2 client's key likewise."""

from __future__ import annotations

import pytest

from pipeline.core.errors import InputError
from pipeline.core.secrets import header_secret, redacted, shown_url
from pipeline.ingest.s2client import Settings

SECRET = "sk-0123456789-never-shown"


@pytest.mark.parametrize("url, shown", [
    (f"https://user:{SECRET}@host:8000/v1/embeddings", "https://<user:password>@host:8000/v1/"
                                                       "embeddings"),
    (f"https://host/v1/embeddings?api-key={SECRET}", "https://host/v1/embeddings?<query>"),
    (f"https://host/x#{SECRET}?token={SECRET}", "https://host/x#<fragment>"),
    (f"user:{SECRET}@host/v1", "<user:password>@host/v1"),
    (f"http:/user:{SECRET}@host/v1", "<user:password>@host/v1"),
    ("http://127.0.0.1:8000/v1/embeddings", "http://127.0.0.1:8000/v1/embeddings"),
])
def test_a_url_is_shown_without_its_secrets(url, shown):
    assert shown_url(url) == shown and SECRET not in shown_url(url)


@pytest.mark.parametrize("value, kind", [
    (f"{SECRET[:5]} {SECRET[5:]}", "a space or a line break"),
    (f"{SECRET[:5]}\r\n{SECRET[5:]}", "a space or a line break"),
    (f"{SECRET}\x07", "a control character"), (f"{SECRET}\u200b", "a control character"),
    (f"{SECRET}ключ", "a letter that is not ASCII"), (f"{SECRET}é", "a letter that is not"),
])
def test_a_key_no_header_can_carry_is_refused_without_its_value(value, kind):
    with pytest.raises(InputError, match=rf"^MY_KEY holds {kind}") as raised:
        header_secret("MY_KEY", value)
    assert SECRET[5:] not in str(raised.value) and "ключ" not in str(raised.value)


def test_a_keys_surrounding_whitespace_is_stripped():
    assert header_secret("MY_KEY", f" {SECRET}\r\n") == SECRET
    assert header_secret("MY_KEY", " \n") is None and header_secret("MY_KEY", None) is None


def test_the_s2_key_is_checked_the_same_way(monkeypatch):
    monkeypatch.setenv("S2_API_KEY", f"{SECRET}\r\n")
    assert Settings.from_environment().key == SECRET
    monkeypatch.setenv("S2_API_KEY", f"{SECRET}\x1b")
    with pytest.raises(InputError, match="S2_API_KEY holds a control character") as raised:
        Settings.from_environment()
    assert SECRET not in str(raised.value)


def test_a_servers_text_keeps_all_but_the_key():
    """redacted: a text without the key is left as it was (its line ends, its words); the key
    whole, a piece of 4 of its characters and a URL's password are replaced; a key of fewer
    than 4 characters only whole; with `most`, one line of at most that many characters."""
    text = "Grade: 2\n{\"O\": 2}\tsee https://docs.example/errors for more"
    assert redacted(text, SECRET) == text and redacted(text, None) == text
    assert redacted(f"a {SECRET} b {SECRET[5:9]} c", SECRET) == "a <key> b <key> c"
    assert redacted(f"http://u:{SECRET}@h/x", None) == "http://<user:password>@h/x"
    assert redacted("abc ab abcd", "abc") == "<key> ab <key>d"
    assert redacted("  a\n\n b  " + "c" * 300, None, 10) == "a b cccccc"
