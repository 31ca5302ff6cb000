"""One renderer for every report page: a page of sections -> ``report.md`` + ``index.html``.

A :class:`Page` is a title, an optional lead paragraph list and :class:`PageSection` s (a heading
and its blocks; not :class:`phenoica.report.Section`, a part of the report that builds
tables, figures and page sections). A page section holds blocks in order: paragraphs (``str``),
:class:`Bullets` (a bullet list, nestable), :class:`Table` (a pandas DataFrame), :class:`Figure`
(a PNG beside the page) and :class:`Links`. :func:`render_markdown` and :func:`render_html` turn
the same page into GitHub-flavoured Markdown and a self-contained HTML page; :func:`write_page`
writes both atomically into a folder, and :func:`save_figure` writes a matplotlib figure
atomically. Paths of figures and links are relative to the page's folder, so a page can be
linked from another page or moved with its folder.

Text (paragraphs, bullet items, table captions) is Markdown with three inline forms, which the
HTML page renders too: ```code```, ``**bold**`` and ``[text](href)``, and backslash escapes;
everything else is escaped. A name from the user's data (gene, guide, plate, batch, model,
channel) put into such text goes through :func:`md_text`, which makes it text in both pages.
The title, headings, table cells, figure captions and link texts are plain text: escaped here
for each page (:func:`md_text` for Markdown, HTML escaping for HTML), and paths are
percent-encoded (:func:`href`), so that no name can become an element of either page. Every
page of the project (the screen's report and the studies') is written by this module.
"""

from __future__ import annotations

import html
import json
import re
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence, Union

import pandas as pd

from phenoica.utils import atomic_path

if TYPE_CHECKING:  # matplotlib is imported by whoever draws the figure, not by every page reader
    from matplotlib.figure import Figure as MplFigure

#: Beside a page that other pages link to: its title and one-line verdict (:func:`write_verdict`).
VERDICT_FILE = "verdict.json"

STYLE = (
    "body{font-family:sans-serif;max-width:1200px;margin:auto;padding:0 1em;line-height:1.4}"
    "table.tbl{border-collapse:collapse;margin:0.5em 0}"
    ".tbl td,.tbl th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}"
    ".tbl th{background:#f4f4f4}figure{margin:1em 0}figcaption{color:#444;font-size:0.9em}"
    "p.note{color:#444;font-size:0.9em}"
    # A wide or long table scrolls in its own box, the page keeps its width.
    "div.scroll{max-width:100%;max-height:640px;overflow:auto;margin:0.5em 0}"
    "div.scroll table.tbl{margin:0}.scroll th{position:sticky;top:0}"
)


@dataclass
class Table:
    """A table block: ``df`` rendered without its index; floats with ``float_format``, or with
    ``formats[column]`` for the columns named there; missing values (NaN, NA, None) are empty."""

    df: pd.DataFrame
    caption: str = ""
    float_format: str = "{:.3g}"
    formats: Mapping[str, str] = field(default_factory=dict)


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


@dataclass
class Bullets:
    """A bullet list; an item that is itself ``Bullets`` nests under the item before it."""

    items: Sequence[Union[str, "Bullets"]]


Block = Union[str, Bullets, Table, Figure, Links]


@dataclass
class PageSection:
    """A heading of a page (``level`` 2 = ``##``) and its blocks, in order."""

    heading: str
    blocks: list[Block] = field(default_factory=list)
    level: int = 2


@dataclass
class Page:
    """A page: ``title`` (the ``#`` heading and the HTML title), ``lead`` blocks, ``sections``."""

    title: str
    lead: list[Block] = field(default_factory=list)
    sections: list[PageSection] = field(default_factory=list)


def _check_block(block: object) -> None:
    if not isinstance(block, (str, Bullets, Table, Figure, Links)):
        raise TypeError(f"render: a block must be str, Bullets, Table, Figure or Links, got {type(block).__name__}")


def _cell(value: object, fmt: str) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return ""
    return fmt.format(value) if isinstance(value, float) else str(value)


def _formatted(table: Table) -> pd.DataFrame:
    """The table's values as strings: floats with their column's format, missing values empty,
    the rest as ``str``."""
    out = pd.DataFrame(index=range(len(table.df)))
    for col in table.df.columns:
        fmt = table.formats.get(str(col), table.float_format)
        out[str(col)] = [_cell(v, fmt) for v in table.df[col].tolist()]
    return out


#: Characters :func:`md_text` escapes: those that start an inline form (code, emphasis, a link,
#: strikethrough), an HTML element, an e-mail autolink or an entity, a table cell's border, or an
#: escape (and, in context, an ``_`` that could open emphasis, the ``:`` of ``://`` and the ``.``
#: of ``www.``).
_MD_SPECIAL = frozenset("\\`*[]<>&|~@")

#: The inline forms of a page's text (module doc): a backslash escape, a code span, bold, and a link
#: to a relative path as :func:`href` writes it (no scheme, no ``<``, quote or space).
_INLINE = re.compile(r"\\([!-/:-@\[-`{-~])|`([^`]+)`|\*\*(.+?)\*\*|\[((?:\\.|[^\]\\])+)\]\(((?!/)[\w.~%/-]+)\)")
#: A text's first character that would start a heading, a list item, a setext underline or a quote.
_BLOCK_START = frozenset("#-+=>")


def _inert(ch: str, before: str, after: str) -> bool:
    """Whether ``ch`` of :data:`_MD_SPECIAL`, between ``before`` and ``after``, is markup in no
    paragraph: a ``<`` that opens no element or autolink (``q < 0.05``), a ``>`` inside a line, an
    ``&`` that starts no entity, a ``|`` outside a table, a single ``~``, brackets that start no
    link, footnote or link definition (``[0.1, 0.8]``)."""
    if ch == "<":
        return not (after.isalpha() or after in "/!?")
    if ch == "&":
        return not (after.isalnum() or after == "#")
    if ch == "~":
        return "~" not in (before, after)
    if ch == "[":
        return after != "^"
    if ch == "]":
        return after not in "(:["
    return ch in ">|"


def md_text(text: object, paragraph: bool = False) -> str:
    """``text`` as literal Markdown text: every character that Markdown (CommonMark, GitHub's
    tables) would read as markup escaped with a backslash, line breaks and other control
    characters as spaces. A name from the user's data goes through this before it is put into
    a paragraph, caption or cell: rendered, it reads as the name, in ``report.md`` as in
    ``index.html`` (:func:`inline_html` reads the escapes back). ``paragraph``: the text is
    inside a paragraph (:func:`md_inline`), where the characters :func:`_inert` names are kept."""
    text = str(text)
    out = []
    for i, ch in enumerate(text):
        before, after = text[i - 1 : i], text[i + 1 : i + 2]
        if ch in _MD_SPECIAL and paragraph and _inert(ch, before, after):
            out.append(ch)
        elif ch in _MD_SPECIAL:
            out.append("\\" + ch)
        elif ch == "_" and not (before.isalnum() and after.isalnum()):  # G1_g1 is no emphasis; _x_ is
            out.append("\\_")
        elif ch == "." and text[max(0, i - 3) : i].lower() == "www":  # GitHub's www. autolinks
            out.append("\\.")
        elif ch == ":" and text[i + 1 : i + 3] == "//":  # and its http:// ones
            out.append("\\:")
        elif ch < " " or ch == "\x7f":
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


def md_inline(text: object) -> str:
    """``text`` (a paragraph, bullet item, table caption or links label: Markdown with the three
    inline forms and backslash escapes) as the Markdown that says what ``index.html`` shows
    (:func:`inline_html`, the same forms): the forms kept, every other character :func:`md_text`
    escapes. Every text block of every page goes through this when it is rendered, so a name a
    section put into its text unescaped is text in ``report.md`` as in ``index.html``; a name
    :func:`md_text` escaped already is kept as it is (its escapes are a form)."""
    text = str(text)
    parts, last = [], 0
    for m in _INLINE.finditer(text):
        parts.append(md_text(text[last : m.start()], paragraph=True))
        escaped, code, bold, label, target = m.groups()
        if escaped is not None or code is not None:
            parts.append(m.group(0))
        elif bold is not None:
            parts.append(f"**{md_inline(bold)}**")
        else:
            parts.append(f"[{md_inline(label)}]({target})")
        last = m.end()
    parts.append(md_text(text[last:], paragraph=True))
    out = "".join(parts)
    return "\\" + out if out[:1] in _BLOCK_START else out


def href(path: str) -> str:
    """A relative path as a link target: percent-encoded (``/`` kept), so that a name in it
    (``<``, spaces, parentheses) can neither end the link nor become markup; a browser decodes
    it back to the file's name."""
    return urllib.parse.quote(str(path), safe="/")


def inline_html(text: str) -> str:
    """``text`` (Markdown with inline code, bold, links and backslash escapes) as escaped HTML."""
    esc = html.escape
    parts, last = [], 0
    for m in _INLINE.finditer(text):
        parts.append(esc(text[last : m.start()]))
        escaped, code, bold, label, href = m.groups()
        if escaped is not None:
            parts.append(esc(escaped))
        elif code is not None:
            parts.append(f"<code>{esc(code)}</code>")
        elif bold is not None:
            parts.append(f"<strong>{inline_html(bold)}</strong>")
        else:
            parts.append(f'<a href="{esc(href, quote=True)}">{inline_html(label)}</a>')
        last = m.end()
    parts.append(esc(text[last:]))
    return "".join(parts)


def _md_bullets(bullets: Bullets, depth: int = 0) -> list[str]:
    lines = []
    for item in bullets.items:
        if isinstance(item, Bullets):
            lines += _md_bullets(item, depth + 1)
        else:
            lines.append("  " * depth + f"- {md_inline(item)}")
    return lines


def _html_bullets(bullets: Bullets) -> str:
    items: list[str] = []
    for item in bullets.items:
        if isinstance(item, Bullets):
            if not items:
                items.append("<li>")
            else:
                items[-1] = items[-1].removesuffix("</li>")
            items[-1] += _html_bullets(item) + "</li>"
        else:
            items.append(f"<li>{inline_html(item)}</li>")
    return "<ul>" + "".join(items) + "</ul>"


def _md_block(block: Block) -> str:
    _check_block(block)
    if isinstance(block, str):
        return md_inline(block)
    if isinstance(block, Bullets):
        return "\n".join(_md_bullets(block))
    if isinstance(block, Table):
        if block.df.empty:
            body = "_(no rows)_"
        else:
            shown = _formatted(block)
            lines = ["| " + " | ".join(md_text(c) for c in shown.columns) + " |", "|" + "---|" * len(shown.columns)]
            lines += ["| " + " | ".join(md_text(v) for v in row) + " |" for row in shown.itertuples(index=False)]
            body = "\n".join(lines)
        return body + (f"\n\n_{md_inline(block.caption)}_" if block.caption else "")
    if isinstance(block, Figure):
        caption = md_text(block.caption)
        return f"![{caption}]({href(block.path)})" + (f"\n\n_{caption}_" if block.caption else "")
    links = ", ".join(f"[{md_text(text)}]({href(target)})" for text, target in block.items)
    return f"{md_inline(block.label)} {links}".strip()


def render_markdown(page: Page) -> str:
    """The page as Markdown: ``# title``, lead blocks, then each section's heading and blocks."""
    parts = [f"# {md_text(page.title)}"] + [_md_block(b) for b in page.lead]
    for section in page.sections:
        parts.append("#" * max(2, section.level) + f" {md_text(section.heading)}")
        parts += [_md_block(b) for b in section.blocks]
    return "\n\n".join(parts) + "\n"


def _html_block(block: Block) -> str:
    _check_block(block)
    esc = html.escape
    if isinstance(block, str):
        return f"<p>{inline_html(block)}</p>"
    if isinstance(block, Bullets):
        return _html_bullets(block)
    if isinstance(block, Table):
        if block.df.empty:
            table = "<p><em>(no rows)</em></p>"
        else:
            table = _formatted(block).to_html(index=False, border=0, classes="tbl", escape=True)
            table = f'<div class="scroll">{table}</div>'
        return table + (f'<p class="note">{inline_html(block.caption)}</p>' if block.caption else "")
    if isinstance(block, Figure):
        cap = f"<figcaption>{esc(block.caption)}</figcaption>" if block.caption else ""
        return (
            f'<figure><img src="{esc(href(block.path), quote=True)}" alt="{esc(block.caption or block.path, quote=True)}"'
            f' style="max-width:100%">{cap}</figure>'
        )
    links = ", ".join(f'<a href="{esc(href(target), quote=True)}">{esc(text)}</a>' for text, target in block.items)
    return f"<p>{inline_html(block.label)} {links}</p>" if block.label else f"<p>{links}</p>"


def render_html(page: Page) -> str:
    """The page as one self-contained HTML document (inline style; figures by relative path)."""
    esc = html.escape
    body = [f"<h1>{esc(page.title)}</h1>"] + [_html_block(b) for b in page.lead]
    for section in page.sections:
        level = min(max(2, section.level), 6)
        body.append(f"<h{level}>{esc(section.heading)}</h{level}>")
        body += [_html_block(b) for b in section.blocks]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(page.title)}</title><style>{STYLE}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def write_page(
    page: Page, out_dir: Path | str, markdown_name: str = "report.md", html_name: str = "index.html"
) -> dict[str, Path]:
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


def save_figure(fig: "MplFigure", path: Path | str, dpi: int = 110) -> Path:
    """Save a matplotlib figure as PNG at ``path`` atomically (tight bounding box). Every text of
    the figure (titles, tick labels, legends, annotations: names from the user's data among
    them) is drawn as it is written: ``$...$`` is not read as mathtext."""
    from matplotlib.text import Text

    for text in fig.findobj(Text):
        text.set_parse_math(False)
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi, bbox_inches="tight")
    return path


def write_verdict(out_dir: Path | str, title: str, verdict: str, page: str = "index.html") -> Path:
    """Write ``out_dir/verdict.json``: the title of the page in ``out_dir``, its file name and a
    one-line verdict (no line breaks), for other pages to link to it (:func:`read_verdict`)."""
    if not verdict.strip() or "\n" in verdict:
        raise ValueError(f"{out_dir}: a page's verdict must be one non-empty line, got {verdict!r}")
    path = Path(out_dir) / VERDICT_FILE
    with atomic_path(path) as tmp:
        tmp.write_text(
            json.dumps({"title": title, "verdict": verdict, "page": page}, indent=2) + "\n", encoding="utf-8"
        )
    return path


def read_verdict(out_dir: Path | str) -> dict[str, Any] | None:
    """The page in ``out_dir`` as another page links to it: ``{"title", "verdict", "page"}`` with
    ``page`` the page's path (``out_dir`` joined), or None when the folder has no written page
    and verdict. A verdict file that is not as :func:`write_verdict` writes it is an error naming it."""
    path = Path(out_dir) / VERDICT_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        title, verdict, page = (str(record[k]) for k in ("title", "verdict", "page"))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: expected a JSON object with title, verdict and page ({exc})") from None
    if not (Path(out_dir) / page).is_file():
        return None
    return {"title": title, "verdict": verdict, "page": str(Path(out_dir) / page)}
