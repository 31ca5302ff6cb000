"""The shared page renderer (phenoica.render): one page -> Markdown and HTML, written atomically."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure as MplFigure

from phenoica import render


def _page(figure_path: str = "figures/a.png") -> render.Page:
    table = pd.DataFrame({"model": ["AE", "AE + ICA"], "InfoM": [0.4123, math.nan], "n": [3, 3]})
    return render.Page("Study <one>", lead=["A & B: measured."], sections=[
        render.Section("Verdict", ["rho = +0.50 [0.10, 0.80]."]),
        render.Section("Table", [render.Table(table, caption="mean over seeds", float_format="{:.2f}")]),
        render.Section("Figures", [render.Figure(figure_path, "B(z) per alpha")], level=3),
        render.Section("Files", [render.Links([("table2.csv", "table2.csv"), ("a|b", "x.csv")], label="Tables:")]),
    ])


def test_markdown_has_headings_tables_figures_and_links_in_order():
    md = render.render_markdown(_page())
    lines = md.splitlines()
    assert lines[0] == "# Study <one>"
    assert md.index("## Verdict") < md.index("## Table") < md.index("### Figures") < md.index("## Files")
    assert "| model | InfoM | n |" in md
    assert "| AE | 0.41 | 3 |" in md and "| AE + ICA |  | 3 |" in md  # NaN is an empty cell, floats formatted
    assert "![B(z) per alpha](figures/a.png)" in md
    assert "Tables: [table2.csv](table2.csv), [a|b](x.csv)" in md


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
    page = render.Page("t", sections=[render.Section("s", [render.Table(pd.DataFrame())])])
    assert "_(no rows)_" in render.render_markdown(page) and "(no rows)" in render.render_html(page)
    with pytest.raises(TypeError, match="block must be"):
        render.render_markdown(render.Page("t", sections=[render.Section("s", [3.0])]))


def test_write_csv_round_trips(tmp_path):
    df = pd.DataFrame({"a": [1, 2], "b": [0.5, np.nan]})
    pd.testing.assert_frame_equal(pd.read_csv(render.write_csv(df, tmp_path / "t" / "x.csv")), df)
