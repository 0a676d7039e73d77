"""The 19 MAG fields of study (docs/ingest.md). Standard library only: the Makefile checks input
with it before the environment exists."""

from __future__ import annotations

from pipeline.core.errors import InputError

# name -> abbreviation used in the MDCR paper's tables
MAG_FIELDS: dict[str, str] = {
    "Art": "Art",
    "Biology": "Bio",
    "Business": "Bus",
    "Chemistry": "Ch",
    "Computer Science": "CS",
    "Economics": "Eco",
    "Engineering": "Eng",
    "Environmental Science": "ES",
    "Geography": "Geog",
    "Geology": "Geol",
    "History": "His",
    "Materials Science": "MS",
    "Mathematics": "Mat",
    "Medicine": "Med",
    "Philosophy": "Phi",
    "Physics": "Phy",
    "Political Science": "PS",
    "Psychology": "Psy",
    "Sociology": "Soc",
}


def resolve_field(name: str) -> str:
    """Canonical field name; input is case-insensitive and may use '-' or '_' for spaces."""
    wanted = name.strip().replace("-", " ").replace("_", " ").casefold()
    for field in MAG_FIELDS:
        if field.casefold() == wanted:
            return field
    raise InputError(
        f"unknown FIELD {name!r}: use one of the 19 MAG fields ({', '.join(MAG_FIELDS)}) "
        "or 'all', or several separated by spaces (medicine computer-science); case does not "
        "matter"
    )


def resolve_fields(name: str) -> list[str]:
    """One field, all 19 for 'all' (the paper's field-level setup), or several separated by
    spaces or commas, written with '-' for their own spaces ('medicine computer-science')."""
    if name.strip().lower() == "all":
        return list(MAG_FIELDS)
    names = [n for n in name.replace(",", " ").split() if n]
    if len(names) > 1 and "all" in (n.lower() for n in names):
        raise InputError(f"FIELD {name!r}: 'all' stands alone (it is the 19 fields); give all, "
                         "or the fields you want (medicine computer-science)")
    try:
        return [resolve_field(name)]
    except InputError:
        names = [n for n in name.replace(",", " ").split() if n]
        if len(names) < 2:
            raise
        return list(dict.fromkeys(resolve_field(n) for n in names))


def field_slug(field: str) -> str:
    """File-name form of a field: 'Computer Science' -> 'computer-science'."""
    return field.lower().replace(" ", "-")
