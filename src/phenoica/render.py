"""One renderer for every report page: a page of sections -> ``report.md`` + ``index.html``.

A :class:`Page` is a title, an optional lead paragraph list and :class:`Section` s; a section
holds blocks in order: paragraphs (``str``), :class:`Table` (a pandas DataFrame), :class:`Figure`
(a PNG beside the page) and :class:`Links`. :func:`render_markdown` and :func:`render_html`
turn the same page into GitHub-flavoured Markdown and a self-contained HTML page (text is
escaped; tables come from pandas); :func:`write_page` writes both atomically into a folder, and
:func:`save_figure` writes a matplotlib figure atomically. Paths of figures and links are
relative to the page's folder, so a page can be linked from another page or moved with its
folder.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence, Union

import pandas as pd
from matplotlib.figure import Figure as MplFigure

from phenoica.io import atomic_path

STYLE = ("body{font-family:sans-serif;max-width:1200px;margin:auto;padding:0 1em;line-height:1.4}"
         "table.tbl{border-collapse:collapse;margin:0.5em 0}"
         ".tbl td,.tbl th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}"
         ".tbl th{background:#f4f4f4}figure{margin:1em 0}figcaption{color:#444;font-size:0.9em}"
         "p.note{color:#444;font-size:0.9em}")


@dataclass
class Table:
    """A table block: ``df`` rendered without its index; floats with ``float_format``."""

    df: pd.DataFrame
    caption: str = ""
    float_format: str = "{:.3g}"


@dataclass
class Figure:
    """An image block: ``path`` relative to the page's folder (e.g. ``figures/x.png``)."""

    path: str
    caption: str = ""


@dataclass
class Links:
    """A line of links: ``(text, href)`` pairs, hrefs relative to the page's folder."""

    items: Sequence[tuple[str, str]]
    label: str = ""


Block = Union[str, Table, Figure, Links]


@dataclass
class Section:
    """A heading (``level`` 2 = ``##``) and its blocks, in order."""

    heading: str
    blocks: list[Block] = field(default_factory=list)
    level: int = 2


@dataclass
class Page:
    """A page: ``title`` (the ``#`` heading and the HTML title), ``lead`` blocks, ``sections``."""

    title: str
    lead: list[Block] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)


def _check_block(block: object) -> None:
    if not isinstance(block, (str, Table, Figure, Links)):
        raise TypeError(f"render: a block must be str, Table, Figure or Links, got {type(block).__name__}")


def _formatted(table: Table) -> pd.DataFrame:
    """The table's values as strings: floats with its format (NaN as empty), the rest as ``str``."""
    out = pd.DataFrame(index=range(len(table.df)))
    for col in table.df.columns:
        values = table.df[col].tolist()
        out[str(col)] = ["" if isinstance(v, float) and v != v else
                         table.float_format.format(v) if isinstance(v, float) else str(v) for v in values]
    return out


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_block(block: Block) -> str:
    _check_block(block)
    if isinstance(block, str):
        return block
    if isinstance(block, Table):
        if block.df.empty:
            body = "_(no rows)_"
        else:
            shown = _formatted(block)
            lines = ["| " + " | ".join(_md_cell(c) for c in shown.columns) + " |",
                     "|" + "---|" * len(shown.columns)]
            lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in shown.itertuples(index=False)]
            body = "\n".join(lines)
        return body + (f"\n\n_{block.caption}_" if block.caption else "")
    if isinstance(block, Figure):
        return f"![{block.caption}]({block.path})" + (f"\n\n_{block.caption}_" if block.caption else "")
    links = ", ".join(f"[{text}]({href})" for text, href in block.items)
    return f"{block.label} {links}".strip()


def render_markdown(page: Page) -> str:
    """The page as Markdown: ``# title``, lead blocks, then each section's heading and blocks."""
    parts = [f"# {page.title}"] + [_md_block(b) for b in page.lead]
    for section in page.sections:
        parts.append("#" * max(2, section.level) + f" {section.heading}")
        parts += [_md_block(b) for b in section.blocks]
    return "\n\n".join(parts) + "\n"


def _html_block(block: Block) -> str:
    _check_block(block)
    esc = html.escape
    if isinstance(block, str):
        return f"<p>{esc(block)}</p>"
    if isinstance(block, Table):
        if block.df.empty:
            table = "<p><em>(no rows)</em></p>"
        else:
            table = _formatted(block).to_html(index=False, border=0, classes="tbl", escape=True)
        return table + (f'<p class="note">{esc(block.caption)}</p>' if block.caption else "")
    if isinstance(block, Figure):
        cap = f"<figcaption>{esc(block.caption)}</figcaption>" if block.caption else ""
        return (f'<figure><img src="{esc(block.path, quote=True)}" alt="{esc(block.caption or block.path, quote=True)}"'
                f' style="max-width:100%">{cap}</figure>')
    links = ", ".join(f'<a href="{esc(href, quote=True)}">{esc(text)}</a>' for text, href in block.items)
    return f"<p>{esc(block.label)} {links}</p>" if block.label else f"<p>{links}</p>"


def render_html(page: Page) -> str:
    """The page as one self-contained HTML document (inline style; figures by relative path)."""
    esc = html.escape
    body = [f"<h1>{esc(page.title)}</h1>"] + [_html_block(b) for b in page.lead]
    for section in page.sections:
        level = min(max(2, section.level), 6)
        body.append(f"<h{level}>{esc(section.heading)}</h{level}>")
        body += [_html_block(b) for b in section.blocks]
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{esc(page.title)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def write_page(page: Page, out_dir: Path | str, markdown_name: str = "report.md",
               html_name: str = "index.html") -> dict[str, Path]:
    """Write the page as ``out_dir/markdown_name`` and ``out_dir/html_name``, each atomically.

    A figure block whose file is missing is an error naming it (a page never points at nothing).
    """
    out = Path(out_dir)
    for block in [*page.lead, *(b for s in page.sections for b in s.blocks)]:
        if isinstance(block, Figure) and not (out / block.path).is_file():
            raise FileNotFoundError(f"{out / block.path}: figure of page {page.title!r} not found")
    written = {}
    for name, text in ((markdown_name, render_markdown(page)), (html_name, render_html(page))):
        with atomic_path(out / name) as tmp:
            tmp.write_text(text, encoding="utf-8")
        written[name] = out / name
    return written


def save_figure(fig: MplFigure, path: Path | str, dpi: int = 110) -> Path:
    """Save a matplotlib figure as PNG at ``path`` atomically (tight bounding box)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi, bbox_inches="tight")
    return path


def write_csv(df: pd.DataFrame, path: Path | str) -> Path:
    """Write ``df`` as CSV (no index) at ``path`` atomically."""
    path = Path(path)
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False)
    return path
