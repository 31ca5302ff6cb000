"""The report's "Notes on this run": the door's notes and the skipped sweep points reach the
page (escaped) and notes.csv; a rerun job's log counts from its last start."""

from __future__ import annotations

import pandas as pd

from phenoica.report import ReportInputs, write_report
from phenoica.report._run_notes import last_job_lines, run_notes, skipped_sweep_points
from tests.report_fixtures import report_options
from tests.test_report import aggregate, ica_gain, make_rows

SKIP = (
    "2026-01-01 10:00:0{i} phenoica.sweep WARNING sweep mae at {k} components: point skipped, the variants' fit "
    "failed (LinAlgError: SVD did not converge) on 40 rows x 16 features; the other points stand"
)


def _log(path, *runs):
    """A job log of several runs, each a start line and its lines."""
    lines = []
    for i, run in enumerate(runs):
        lines += [f"2026-01-01 10:00:0{i} phenoica.sweep INFO job cpu start: 1.0{i} s", *run]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_only_the_last_run_of_a_log_counts_and_its_skipped_points_are_found(tmp_path):
    first = [SKIP.format(i=0, k=8), SKIP.format(i=0, k=16)]
    last = [
        "2026-01-01 10:00:01 phenoica.sweep INFO sweep mae/pca at 4 components: 3 guide hits",
        SKIP.format(i=1, k=16),
    ]
    log = _log(tmp_path / "mae.log", first, last)
    assert last_job_lines(log) == last
    assert last_job_lines(tmp_path / "absent.log") == []
    assert skipped_sweep_points([log, tmp_path / "absent.log"]) == [
        "sweep mae at 16 components: point skipped, the variants' fit failed (LinAlgError: SVD did not converge) "
        "on 40 rows x 16 features; the other points stand"
    ]
    notes = run_notes(["zero-row file x.parquet: batch B2 has no rows"], [log])
    assert notes.to_dict("records") == [
        {"source": "door", "note": "zero-row file x.parquet: batch B2 has no rows"},
        {"source": "sweep", "note": skipped_sweep_points([log])[0]},
    ]


def test_the_notes_are_a_section_of_the_report_and_a_table(tmp_path):
    rows = make_rows(ica_gain, variants=("base",), n_genes=3, n_null=0)
    guides, genes = aggregate(rows)
    notes = run_notes(
        ["gene <b>*G1*</b>: every profile is all zero"], [_log(tmp_path / "s.log", [SKIP.format(i=0, k=8)])]
    )
    written = write_report(tmp_path / "r", ReportInputs(rows, guides, genes, notes=notes), report_options())
    md = written["report_md"].read_text()
    assert "## Notes on this run" in md
    assert r"- door: gene \<b\>\*G1\*\</b\>: every profile is all zero" in md  # text, not markup
    assert "- sweep: sweep mae at 8 components: point skipped" in md
    assert "&lt;b&gt;*G1*&lt;/b&gt;" in written["index_html"].read_text()
    pd.testing.assert_frame_equal(pd.read_csv(written["notes"]), notes)
    plain = write_report(tmp_path / "plain", ReportInputs(rows, guides, genes), report_options())
    assert "Notes on this run" not in plain["report_md"].read_text() and "notes" not in plain
