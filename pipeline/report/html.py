"""The report as one self-contained HTML page (`runs/reports/<corpus>.html`).

The page is rendered from the report's data alone, generically: every section's tables (and
a section's Markdown text: headings, paragraphs and pipe tables), its plots (the PNGs, inline
as base64) and the provenance of the numbers. A section added to the report later appears
without work here. One file that opens offline: the style and the script (package data,
`page.css` and `page.js`) are written into it, nothing is fetched. Tables sort by a click on a
header and filter by words; a bold cell and a † say on hover what they mean (the table's
caption's or notes' own words); a cell names on hover the commands that make its number
again. Each table's notes (the method: the same words as the Markdown's list and the LaTeX's)
are folded under a closed `<details>` beneath it, opened by a click.

Deterministic: the same report gives the same bytes (no time, no random id, JSON with sorted
keys, every list in the report's own order).
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Protocol

from pipeline.layout import REPORT_PAGE_SCRIPT, REPORT_PAGE_STYLE
from pipeline.report.tables import markdown_unescaped

BEST = "the best of its column"  # what bold says where a caption does not say it
SIGNIFICANT = ("significantly below the best of its column (the 95% interval of its difference "
               "excludes 0, the summary's test)")
MISSING_SHOWN = 20  # missing manifests named on the page (all are counted)


class TableLike(Protocol):
    name: str
    caption: str
    header: list[str]
    rows: list[list[str]]
    notes: tuple[str, ...]


class PlotLike(Protocol):
    name: str


class SectionLike(Protocol):
    name: str
    tables: Sequence[TableLike]
    plots: Sequence[PlotLike]
    text: str | None


class ProvenanceLike(Protocol):
    about: Sequence[tuple[str, str]]
    pools: tuple[list[str], list[list[str]]]
    runs: tuple[list[str], list[list[str]]]
    commands: Mapping[str, str]
    missing: Sequence[str]


def _asset(name: str) -> str:
    return resources.files("pipeline.report").joinpath(name).read_text(encoding="utf-8")


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


# what a <script> block's JSON may not hold as itself: `<` (`</script>` ends the block, and
# `<!--` then `<script` makes the parser swallow the page's next script), `>` and `&`
_SCRIPT_UNSAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def script_json(value: object) -> str:
    """`value` as JSON to embed in a <script> element: whatever names it holds (a corpus,
    model or pool named `<!--<script>`), the block ends where the page says, and
    `JSON.parse` gives back the same value. ASCII only (U+2028 and U+2029, line ends to older
    JavaScript, are escaped with the rest); keys sorted: the same bytes every time."""
    return json.dumps(value, sort_keys=True, ensure_ascii=True).translate(_SCRIPT_UNSAFE)


def mark_meaning(caption: str, sign: str, default: str, notes: Sequence[str] = ()) -> str:
    """What a mark means, in the caption's own words (`bold: best MAP; †: MAP significantly
    below ...`), else in a note's (`Bold: the best average MAP.`), else `default`."""
    for text in (caption, *notes):
        found = re.search(rf"(?:^|[;,(]\s*){re.escape(sign)}:\s*(.+?)(?:;\s|$)", text,
                          re.IGNORECASE)
        if found:
            return found.group(1).strip().removesuffix(".")
    return default


def cell(text: str, best: str, worse: str) -> str:
    """A cell's text as HTML: `**x**` bold with `best` on hover, `†` with `worse` on hover."""
    out = _e(text)
    out = re.sub(r"\*\*(.+?)\*\*", lambda m: f'<b title="{_e(best)}">{m.group(1)}</b>', out)
    return out.replace("†", f'<abbr class="sig" title="{_e(worse)}">†</abbr>')


def notes_block(notes: Sequence[str]) -> str:
    """A table's notes as a list folded under a closed `<details>` (opened by a click)."""
    if not notes:
        return ""
    items = "".join(f"<li>{_e(note)}</li>" for note in notes)
    return (f'<details class="notes"><summary>Notes: the method ({len(notes)})</summary>'
            f"<ul>{items}</ul></details>")


def table(name: str, caption: str, header: Sequence[str], rows: Sequence[Sequence[str]],
          kind: str = "result", notes: Sequence[str] = ()) -> str:
    """One table with its caption, tools (a filter box, colour by value, a row count) and its
    notes folded beneath it."""
    best = mark_meaning(caption, "bold", BEST, notes)
    worse = mark_meaning(caption, "†", SIGNIFICANT, notes)
    head = "".join(f'<th scope="col">{_e(h)}</th>' for h in header)
    body = "\n".join("<tr>" + "".join(f"<td>{cell(c, best, worse)}</td>" for c in row)
                     + "</tr>" for row in rows)
    plain = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return (f'<div class="block" id="t-{_e(plain)}">'
            + (f'<p class="caption">{cell(caption, best, worse)}</p>' if caption else "")
            + '<div class="tools"><input type="search" class="filter" placeholder="filter rows '
            'by words" aria-label="filter rows"> <label><input type="checkbox" class="heat"> '
            f'colour by value</label> <span class="count">{len(rows)} row'
            f'{"" if len(rows) == 1 else "s"}</span></div>'
            f'<div class="scroll"><table class="data {kind}" data-name="{_e(name)}">'
            f"<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table></div>"
            f"{notes_block(notes)}</div>")


def markdown_blocks(text: str) -> list[tuple[str, object]]:
    """Markdown as a section's text writes it: ("heading", str), ("table", (header, rows)),
    ("list", [str, ...]: lines begun "- ") and ("paragraph", str) blocks, in order, each as the
    text it was written from (the escapes of `tables.markdown_cell` and `markdown_text`
    undone)."""
    blocks: list[tuple[str, object]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("|"):
            found = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                found.append(lines[i].strip())
                i += 1
            cells = [[markdown_unescaped(c) for c in (
                         row[1:-1] if row.endswith("|") else row[1:]).strip().split(" | ")]
                     for row in found
                     if not re.fullmatch(r"\|(?:\s*:?-+:?\s*\|)+", row)]
            blocks.append(("table", (cells[0], cells[1:])))
            continue
        if line.startswith("#"):
            blocks.append(("heading", markdown_unescaped(line.lstrip("#").strip())))
        elif line.startswith("- "):
            if not blocks or blocks[-1][0] != "list":
                blocks.append(("list", []))
            blocks[-1][1].append(markdown_unescaped(line[2:]))  # type: ignore[union-attr]
        elif line:
            blocks.append(("paragraph", markdown_unescaped(line)))
        i += 1
    return blocks


def text_section(name: str, text: str) -> str:
    """A section's Markdown text: each heading becomes the caption of the table below it."""
    parts, caption, count = [], "", 0
    for kind, value in markdown_blocks(text):
        if kind == "heading":
            if caption:
                parts.append(f'<p class="caption">{_e(caption)}</p>')
            caption = str(value)
        elif kind == "table":
            header, rows = value  # type: ignore[misc]
            count += 1
            parts.append(table(f"{name}-{count}", caption, header, rows))
            caption = ""
        else:  # a paragraph or list: the heading above it (if any) is its own, not a table's
            if caption:
                parts.append(f'<p class="caption">{_e(caption)}</p>')
                caption = ""
            parts.append(f"<p>{_e(value)}</p>" if kind == "paragraph" else
                         "<ul>" + "".join(f"<li>{_e(item)}</li>" for item in value) + "</ul>")
    if caption:
        parts.append(f'<p class="caption">{_e(caption)}</p>')
    return "\n".join(parts)


def figure(name: str, png: bytes) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure class="plot" id="p-{_e(name)}"><img alt="{_e(name)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{_e(name)}</figcaption></figure>')


def provenance_section(prov: ProvenanceLike) -> str:
    """The code, parameters, checksums and commands behind the numbers."""
    about = "".join(f"<tr><th scope=\"row\">{_e(k)}</th><td><code>{_e(v)}</code></td></tr>"
                    for k, v in prov.about)
    missing = ""
    if prov.missing:
        named = ", ".join(prov.missing[:MISSING_SHOWN])
        more = len(prov.missing) - MISSING_SHOWN
        missing = (f'<p class="note">Manifests not found ({len(prov.missing)}): {_e(named)}'
                   + (f" and {more} more" if more > 0 else "") + "</p>")
    return ('<section id="provenance"><h2>Provenance</h2>'
            '<p>Every number above is made from the runs and pools below, by the code they '
            'name; a table cell names on hover the commands that make it again (add '
            '<code>DATA=&lt;folder&gt;</code> where the data is not the checkout\'s own). '
            'Checksums are those the manifests recorded when the files were written.</p>'
            f'<table class="about">{about}</table>{missing}'
            '<h3>Pools</h3>' + table("provenance-pools", "", *prov.pools, kind="provenance")
            + '<h3>Runs</h3>' + table("provenance-runs", "", *prov.runs, kind="provenance")
            + "</section>")


def own_heading(name: str, text: str | None) -> tuple[str, str | None]:
    """The heading a section shows and the text under it: a text section that opens with a
    heading of its own over prose (the summary, a list) shows that heading, once; any other
    shows its name."""
    if text is None:
        return name, None
    blocks = markdown_blocks(text)
    if len(blocks) > 1 and blocks[0][0] == "heading" and blocks[1][0] in ("paragraph", "list"):
        return str(blocks[0][1]), text.lstrip().partition("\n")[2]
    return name, text


def page(corpus: str, seed: int, sections: Sequence[SectionLike],
         images: Mapping[str, bytes], prov: ProvenanceLike | None = None) -> str:
    """The whole page: a section per report section that has something to show (its tables,
    text and plots: `images`, each plot's PNG by its name), then the provenance."""
    shown = [s for s in sections if s.tables or s.plots or s.text]
    body = []
    for section in shown:
        parts = [table(t.name, t.caption, t.header, t.rows, notes=t.notes)
                 for t in section.tables]
        heading, text = own_heading(section.name, section.text)
        if text is not None:
            parts.append(text_section(section.name, text))
        parts += [figure(p.name, images[p.name]) for p in section.plots if p.name in images]
        body.append(f'<section id="s-{_e(section.name)}"><h2>{_e(heading)}</h2>'
                    + "\n".join(parts) + "</section>")
    if prov is not None:
        body.append(provenance_section(prov))
    links = [f'<a href="#s-{_e(s.name)}">{_e(s.name)}</a>' for s in shown]
    if prov is not None:
        links.append('<a href="#provenance">provenance</a>')
    commands = script_json(dict(prov.commands) if prov else {})
    rebuild = next((v for k, v in prov.about if k == "rebuild this page"), "") if prov else ""
    title = f"Results: {corpus} (pools of seed {seed})"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="icon" href="data:,"><title>{_e(title)}</title>'
        f"<style>\n{_asset(REPORT_PAGE_STYLE)}</style></head>\n"
        f'<body data-rebuild="{_e(rebuild)}"><header><h1>{_e(title)}</h1>'
        f'<nav>{" ".join(links)}</nav>'
        '<p class="note">Click a column header to sort, type in a box to keep the rows that '
        'hold every word; <b>bold</b>: the best of its column, <abbr class="sig" title="'
        f'{_e(SIGNIFICANT)}">†</abbr>: significantly below it (hover a mark: the test). '
        "Values x100 unless a caption says otherwise.</p></header>\n<main>\n"
        + "\n".join(body) + "\n</main>\n"
        f'<script type="application/json" id="run-commands">{commands}</script>\n'
        f"<script>\n{_asset(REPORT_PAGE_SCRIPT)}</script>\n</body></html>\n")
