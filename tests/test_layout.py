from __future__ import annotations

import pytest

from pipeline.core.errors import InputError
from pipeline.fields import MAG_FIELDS, resolve_field, resolve_fields
from pipeline.layout import format_size, group_name, parse_pool_name, parse_size, pool_name
from pipeline.models import REGISTRY, get_model


@pytest.mark.parametrize("text,value", [("20000", 20000), ("20k", 20000), ("2M", 2_000_000),
                                        ("1.5M", 1_500_000), ("100K", 100_000)])
def test_sizes(text, value):
    assert parse_size(text) == value
    assert parse_size(format_size(value)) == value


@pytest.mark.parametrize("text", ["", "2G", "k", "-5", "1.5", "0", "20 k"])
def test_malformed_sizes(text):
    with pytest.raises(InputError, match="malformed SIZE"):
        parse_size(text)


def test_pool_names_round_trip():
    assert pool_name("medicine", 20000, 2) == "medicine-20k-r2"
    assert parse_pool_name("computer-science-1500-r0") == (
        "computer-science", 1500, 0, 0, "test", "")
    assert pool_name("all", 10000, 1, seed=3) == "all-10k-s3-r1"
    assert parse_pool_name("all-10k-s3-r1") == ("all", 10000, 1, 3, "test", "")
    assert pool_name("all", 10000, 1, seed=3, split="validation") == "all-10k-s3-r1-val"
    assert parse_pool_name("medicine-100k-r2-val") == ("medicine", 100000, 2, 0, "validation", "")
    digest = "3fa2b1c9" + "0" * 56  # an exclusion list's ids sha256: its first 8 hex name pools
    name = pool_name("all", 200000, 1, seed=2, split="validation", exclusion=digest)
    assert name == "all-200k-s2-x3fa2b1c9-r1-val"
    assert parse_pool_name(name) == ("all", 200000, 1, 2, "validation", "3fa2b1c9")
    assert group_name(name) == "all-200k-s2-x3fa2b1c9" != group_name("all-200k-s2-r0")
    with pytest.raises(InputError, match="malformed pool name"):
        parse_pool_name("all-200k-xZZ-r0")


def test_fields_are_case_insensitive_and_exact():
    assert len(MAG_FIELDS) == 19
    assert resolve_field("computer science") == "Computer Science"
    assert resolve_field("materials-science") == "Materials Science"
    with pytest.raises(InputError, match="unknown FIELD"):
        resolve_field("Medicin")


def test_several_fields_are_separated_by_spaces_or_commas():
    assert resolve_fields("Computer Science") == ["Computer Science"]
    assert resolve_fields("medicine, computer-science biology medicine") == [
        "Medicine", "Computer Science", "Biology"]
    assert len(resolve_fields("ALL")) == 19
    with pytest.raises(InputError, match="unknown FIELD 'Computer'"):
        resolve_fields("Medicine Computer Science")  # a name's own space must be '-' here


def test_registry_holds_the_papers_encoders():
    for name in ("bm25", "minilm", "scibert", "specter", "scincl", "specter2", "aspire-cs",
                 "aspire-bio", "e5-base-v2"):
        assert name in REGISTRY
    assert get_model("SciNCL").hf_id == "malteos/scincl"
    assert get_model("specter").similarity == "l2"  # SPECTER-family ranks by L2 distance
    assert get_model("specter2").adapter == "allenai/specter2"
    with pytest.raises(InputError, match="unknown MODEL"):
        get_model("bert-large")
