"""The shared page renderer (phenoica.report._render): one page -> Markdown and HTML, written atomically."""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure as MplFigure

from phenoica.report import _render as render
from phenoica.utils import write_csv


def _page(figure_path: str = "figures/a.png") -> render.Page:
    table = pd.DataFrame({"model": ["AE", "AE + ICA"], "InfoM": [0.4123, math.nan], "n": [3, 3]})
    return render.Page(
        "Study <one>",
        lead=["A & B: measured."],
        sections=[
            render.PageSection("Verdict", ["rho = +0.50 [0.10, 0.80]."]),
            render.PageSection("Table", [render.Table(table, caption="mean over seeds", float_format="{:.2f}")]),
            render.PageSection("Figures", [render.Figure(figure_path, "B(z) per alpha")], level=3),
            render.PageSection(
                "Files", [render.Links([("table2.csv", "table2.csv"), ("a|b", "x.csv")], label="Tables:")]
            ),
        ],
    )


def test_markdown_has_headings_tables_figures_and_links_in_order():
    md = render.render_markdown(_page())
    lines = md.splitlines()
    assert lines[0] == "# Study \\<one\\>"  # the title is text: escaped for Markdown
    assert md.index("## Verdict") < md.index("## Table") < md.index("### Figures") < md.index("## Files")
    assert "| model | InfoM | n |" in md
    assert "| AE | 0.41 | 3 |" in md and "| AE + ICA |  | 3 |" in md  # NaN is an empty cell, floats formatted
    assert "![B(z) per alpha](figures/a.png)" in md
    assert "Tables: [table2.csv](table2.csv), [a\\|b](x.csv)" in md


def test_html_escapes_text_and_renders_the_same_content():
    page = _page()
    text = render.render_html(page)
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert "<title>Study &lt;one&gt;</title>" in text and "<h1>Study &lt;one&gt;</h1>" in text
    assert "<p>A &amp; B: measured.</p>" in text
    assert "<h3>Figures</h3>" in text and '<img src="figures/a.png"' in text
    assert "<td>0.41</td>" in text and '<a href="table2.csv">table2.csv</a>' in text


def test_write_page_writes_both_files_and_refuses_a_missing_figure(tmp_path):
    with pytest.raises(FileNotFoundError, match="figures/a.png"):
        render.write_page(_page(), tmp_path)
    assert not (tmp_path / "index.html").exists()  # nothing half-written
    fig = MplFigure()
    fig.subplots().plot(np.arange(3))
    render.save_figure(fig, tmp_path / "figures" / "a.png")
    written = render.write_page(_page(), tmp_path)
    assert set(written) == {"report.md", "index.html"}
    assert written["report.md"].read_text() == render.render_markdown(_page())
    assert written["index.html"].read_text() == render.render_html(_page())
    assert (tmp_path / "figures" / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(".*tmp*"))  # no temporaries left


def test_empty_table_and_bad_block():
    page = render.Page("t", sections=[render.PageSection("s", [render.Table(pd.DataFrame())])])
    assert "_(no rows)_" in render.render_markdown(page) and "(no rows)" in render.render_html(page)
    with pytest.raises(TypeError, match="block must be"):
        render.render_markdown(render.Page("t", sections=[render.PageSection("s", [3.0])]))


def test_write_csv_round_trips(tmp_path):
    df = pd.DataFrame({"a": [1, 2], "b": [0.5, np.nan]})
    pd.testing.assert_frame_equal(pd.read_csv(write_csv(df, tmp_path / "t" / "x.csv")), df)


def test_bullets_inline_markup_and_column_formats():
    table = pd.DataFrame(
        {"auroc": [0.71234, math.nan], "p_value": [0.0012345, 0.5], "n": pd.array([3, pd.NA], "Int64")}
    )
    page = render.Page(
        "t",
        sections=[
            render.PageSection(
                "s",
                [
                    render.Bullets(
                        ["Model `mae`: **best** <x>", render.Bullets(["see [page](../b/index.html)"]), "two"]
                    ),
                    render.Table(table, float_format="{:.3f}", formats={"p_value": "{:.2g}"}),
                ],
            )
        ],
    )
    md = render.render_markdown(page)
    # the three inline forms kept; what else would be markup is escaped, as index.html shows it
    assert "- Model `mae`: **best** \\<x>\n  - see [page](../b/index.html)\n- two" in md
    assert "| 0.712 | 0.0012 | 3 |" in md and "|  | 0.5 |  |" in md  # NaN and NA are empty cells
    text = render.render_html(page)
    assert (
        "<ul><li>Model <code>mae</code>: <strong>best</strong> &lt;x&gt;"
        '<ul><li>see <a href="../b/index.html">page</a></li></ul></li><li>two</li></ul>'
    ) in text
    assert "<td>0.0012</td>" in text and "&lt;NA&gt;" not in text


def test_verdict_round_trip_and_bad_files(tmp_path):
    assert render.read_verdict(tmp_path) is None
    render.write_verdict(tmp_path, "Study", "rho +0.5 [0.1, 0.8].")
    assert render.read_verdict(tmp_path) is None  # no page beside it yet: nothing to link
    (tmp_path / "index.html").write_text("<html></html>")
    assert render.read_verdict(tmp_path) == {
        "title": "Study",
        "verdict": "rho +0.5 [0.1, 0.8].",
        "page": str(tmp_path / "index.html"),
    }
    with pytest.raises(ValueError, match="one non-empty line"):
        render.write_verdict(tmp_path, "Study", "two\nlines")
    (tmp_path / "verdict.json").write_text('{"title": "Study"}')
    with pytest.raises(ValueError, match="verdict.json: expected a JSON object with title, verdict and page"):
        render.read_verdict(tmp_path)


def test_wide_tables_scroll_in_their_own_box():
    wide = pd.DataFrame({f"column_{i}": [1.0, 2.0] for i in range(40)})
    text = render.render_html(render.Page("p", sections=[render.PageSection("t", [render.Table(wide)])]))
    assert '<div class="scroll"><table' in text and "div.scroll{max-width:100%" in text and "overflow:auto" in text


# --------------------------------------------------------------------------- names stay text

#: Names a hostile (or careless) user supplies; each would be an element, a link or markup if
#: it reached a page unescaped.
PAYLOADS = {
    "model": "m<img src=x onerror=alert(1)>",
    "gene": "<script>alert(1)</script>",
    "alike": "_script_alert_1___script_",  # sanitizes to the same file stem as the gene above
    "link": "[x](javascript:alert(1))",
    "markup": "**b** `c` | ~~d~~ _e_ <b>f</b> &amp; http://e.vil www.e.vil",
}


class _Elements(__import__("html.parser").parser.HTMLParser):
    """Every start tag of an HTML text, with its attributes; and its text, entities decoded."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _payload_page(tmp_path) -> tuple[render.Page, set[str], str]:
    """The report's own sections (headline, tables, figures) for a screen whose model, genes and
    guides carry the payloads, with the gallery section and a gene-map figure; and the figure
    and link targets the page itself makes."""
    from phenoica.report import ReportInputs, write_report
    from phenoica.report._gallery import GalleryResult, ReadStats, gallery_section, panel_file
    from phenoica.report._gene_maps import heatmap_caption
    from tests.report_fixtures import report_options
    from tests.test_report import aggregate, ica_gain, make_rows

    rows = make_rows(ica_gain, model=PAYLOADS["model"], n_genes=4, n_null=3)
    names = {"G0": PAYLOADS["gene"], "G1": PAYLOADS["alike"], "G2": PAYLOADS["link"], "G3": PAYLOADS["markup"]}
    guide_names = zip(rows["Metadata_Gene"], rows["Metadata_Guide"])
    rows["Metadata_Guide"] = [names.get(g, g) + guide[2:] for g, guide in guide_names]
    rows["Metadata_Gene"] = rows["Metadata_Gene"].replace(names)
    guides, genes = aggregate(rows)
    written = write_report(tmp_path / "r", ReportInputs(rows, guides, genes), report_options())
    page = render.Page("phenoica report")
    md = written["report_md"].read_text()
    assert PAYLOADS["model"] not in md and PAYLOADS["gene"] not in md  # raw nowhere
    panels = pd.DataFrame({"gene": list(names.values()), "status": "drawn", "guides": 2})
    panels["panel"] = [panel_file(g) for g in panels["gene"]]
    for col in ("n_guide_images", "n_control_images", "plates"):
        panels[col] = 1
    gallery = gallery_section(
        GalleryResult(panels, pd.DataFrame(), [f"plate {PAYLOADS['model']}: store not found"], ReadStats()),
        tmp_path,
        tmp_path / "gallery",
    )
    heat = f"figures/biomap_heatmap_{PAYLOADS['model']}_pca.png"
    page.sections = [
        gallery,
        render.PageSection("Gene maps", [render.Figure(heat, heatmap_caption(PAYLOADS["model"], "pca"))]),
    ]
    targets = {render.href(heat)} | {render.href(f"gallery/{p}") for p in panels["panel"]}
    return page, targets, md


def test_report_md_rendered_by_commonmark_holds_no_element_a_name_made(tmp_path):
    """Rendered by a CommonMark renderer (markdown-it, with raw HTML allowed, as a Git forge or an
    editor's preview renders it), report.md and the gallery and gene-map sections make only the
    elements the page makes: no raw HTML, no script, no event attribute, no image or link but the
    page's own; every name reads back as its text, markup characters and all. The HTML page says
    the same."""
    from markdown_it import MarkdownIt

    page, targets, report_md = _payload_page(tmp_path)
    commonmark = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")
    allowed = {"h1", "h2", "h3", "p", "em", "strong", "code", "ul", "li", "table", "thead", "tbody", "tr", "th", "td"}
    for md in (report_md, render.render_markdown(page)):
        tokens = commonmark.parse(md)
        inline = [t for block in tokens for t in [block, *(block.children or [])]]
        assert not [t for t in inline if t.type in ("html_inline", "html_block", "s_open")]
        parsed = _Elements()
        parsed.feed(commonmark.render(md))
        assert {tag for tag, _ in parsed.tags} <= allowed | {"img", "a"}
        assert not [a for _, attrs in parsed.tags for a in attrs if a.startswith("on")]
        assert {a["src"] for t, a in parsed.tags if t == "img"} <= targets | {
            f"figures/{n}.png" for n in ("auroc_by_variant", "volcano", "null_qq", "paired_pca_ica_vs_pca")
        } | {f"figures/{n}_by_variant.png" for n in ("sparsity", "concentration")}
        assert not [a for t, a in parsed.tags if t == "a" and a["href"].startswith(("javascript", "http", "www"))]
        text = "".join(parsed.text)
        for name in PAYLOADS.values():
            assert name in text, name  # each name reads as itself: in a table cell, a caption, a link
    assert f"Clustered gene-gene cosine map, {PAYLOADS['model']} / pca" in text
    html_page = _Elements()
    html_page.feed(render.render_html(page))
    assert {tag for tag, _ in html_page.tags} <= allowed | {
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "div",
        "figure",
        "img",
        "figcaption",
        "a",
    }
    assert {a["src"] for t, a in html_page.tags if t == "img"} <= targets
    assert all(name in "".join(html_page.text) for name in PAYLOADS.values())


def test_figure_text_is_drawn_as_written_never_as_mathtext(tmp_path):
    """A name in a figure's title or tick labels is text: ``$...$`` is not mathtext, so a name
    that is broken mathtext (``$\\frac{$``) draws as written instead of failing the report, and
    one that is valid mathtext (``$x^2$``) draws the same pixels as plain text would."""
    fig = MplFigure()
    ax = fig.subplots()
    ax.set_title("gene $\\frac{$ / model a$x^2$b")
    ax.set_xticks([0, 1], ["$\\alpha$", "G$1"])
    render.save_figure(fig, tmp_path / "names.png")  # raised ValueError (mathtext) before
    plain = MplFigure()
    ax = plain.subplots()
    ax.set_title("gene $\\frac{$ / model a$x^2$b", parse_math=False)
    ax.set_xticks([0, 1], ["$\\alpha$", "G$1"])
    for label in ax.get_xticklabels():
        label.set_parse_math(False)
    render.save_figure(plain, tmp_path / "plain.png")
    assert (tmp_path / "names.png").read_bytes() == (tmp_path / "plain.png").read_bytes()


def test_md_text_escapes_markup_and_inline_html_reads_it_back():
    cases = {
        "G1_g1": "G1_g1",  # an underscore inside a word opens no emphasis: left as is
        "_e_": "\\_e\\_",
        "<b>&</b>": "\\<b\\>\\&\\</b\\>",
        "[x](y)": "\\[x\\](y)",
        "a|b`c`*d*~~e~~": "a\\|b\\`c\\`\\*d\\*\\~\\~e\\~\\~",
        "see http://x and www.y, me@z": "see http\\://x and www\\.y, me\\@z",
        "line\nbreak\x00": "line break ",
        "Gallery: G1": "Gallery: G1",
    }
    for name, escaped in cases.items():
        assert render.md_text(name) == escaped
        assert render.inline_html(escaped) == html.escape(name.replace("\n", " ").replace("\x00", " "))
    assert render.href("gene_maps/m<i> x(1)#?.png") == "gene_maps/m%3Ci%3E%20x%281%29%23%3F.png"
