"""Sources keyed on their content: rewriting what one plate's ingest reads reruns that
plate's ingest alone (slow: each case ingests a two-plate screen of its source).

Kept apart from tests/test_workflow.py so that the two files' slow tests can run on different
pytest-xdist workers (``--dist loadfile``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

import pandas as pd
import pytest

from tests.test_workflow import snakemake, write_config

RERUN_PLATES = ("PL1", "PL2")
RERUN_WELLS = (("A", "1"), ("A", "2"), ("B", "1"))  # the wells of tests.test_loaddata.write_fixture


def planned_plates(workdir: Path, *targets: str) -> list[tuple[str, str, str]]:
    """(rule, plate, reason) of each job a dry run of ``targets`` plans."""
    out = snakemake(workdir, "-n", *targets).stdout
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", out):
        head = re.match(r"(?:local)?rule (\w+):", block.strip())
        plate = re.search(r"wildcards: .*plate=([^,\s]+)", block)
        if head and plate:
            reason = re.search(r"reason: (.*)", block)
            jobs.append((head.group(1), plate.group(1), reason.group(1) if reason else ""))
    return jobs


def _rerun_screen(workdir: Path, source: str) -> tuple[dict, str, list[tuple[str, Callable[[], None]]]]:
    """A two-plate screen of ``source`` in ``workdir`` (PL1 in batch B1, PL2 in B2; 32 x 32
    images, wells A01 control, A02 and B01 perturbed), its screen config, its ingest rule and
    edits in place, each with the plate it concerns: (plate, edit)."""
    import numpy as np
    import tifffile
    import zarr

    from tests.test_ingest import write_hcs_by_hand_v3, write_png
    from tests.test_loaddata import write_fixture

    maps = [write_fixture(workdir, plate=p, shape=(32, 32), batch=f"B{i + 1}")[1] for i, p in enumerate(RERUN_PLATES)]
    pd.concat(maps).to_csv(workdir / "plate_map.csv", index=False)
    rng = np.random.default_rng(0)
    if source == "loaddata":
        csv = workdir / "load_data_with_illum_PL1.csv"

        def swap_channels() -> None:  # FileName_OrigDNA and FileName_OrigER swapped in PL1's CSV
            t = pd.read_csv(csv, dtype=str)
            t.assign(FileName_OrigDNA=t["FileName_OrigER"], FileName_OrigER=t["FileName_OrigDNA"]).to_csv(
                csv, index=False
            )

        image = next((workdir / "images" / "PL2").glob("*ch2*.tiff"))
        screen = {"loaddata": "load_data_with_illum_*.csv"}
        edits = [("PL1", swap_channels), ("PL2", lambda: tifffile.imwrite(image, np.full((32, 32), 9, np.uint16)))]
        rule = "ingest_loaddata"
    elif source == "images":
        for plate in RERUN_PLATES:
            for (row, col), site, ch in [(w, s, c) for w in RERUN_WELLS for s in (1, 2) for c in (1, 2, 3)]:
                arr = rng.integers(0, 255, (32, 32), dtype=np.uint8)
                write_png(workdir / "images" / plate / f"{row}{col}_s{site}_w{ch}.png", arr)
        image = workdir / "images" / "PL2" / "B1_s2_w3.png"
        screen = {"images_dir": "images", "image_pattern": "{plate}/{well}_s{site}_w{channel}.png"}
        edits = [("PL2", lambda: write_png(image, rng.integers(0, 255, (32, 32), dtype=np.uint8)))]
        rule = "ingest_images"
    else:
        for plate in RERUN_PLATES:
            pixels = {
                (f"{r}{c}", f): rng.integers(0, 255, (1, 3, 1, 32, 32), dtype=np.uint8)
                for r, c in RERUN_WELLS
                for f in (0, 1)
            }
            write_hcs_by_hand_v3(workdir / "ome_zarr" / f"{plate}.zarr", pixels, list(RERUN_WELLS))

        def rewrite_field() -> None:  # one field of PL1's HCS plate, new pixels in place
            field = zarr.open_group(str(workdir / "ome_zarr" / "PL1.zarr"), mode="r+")["A/2/1/0"]
            field[:] = 255 - field[:]

        screen = {"ome_zarr_dir": "ome_zarr"}
        edits = [("PL1", rewrite_field)]
        rule = "ingest_ome_zarr"
    return {"source": source, "plate_map": "plate_map.csv", **screen}, rule, edits


@pytest.mark.slow
@pytest.mark.parametrize("source", ["loaddata", "images", "ome_zarr"])
def test_rewritten_source_data_reruns_its_plate_alone(tmp_path, source):
    """After both plates are ingested, a dry run plans nothing; editing what one plate's
    ingest reads (a LoadData CSV's channel columns swapped, an image it names rewritten in place,
    an image file or an OME-Zarr field rewritten in place) plans that plate's ingest job alone,
    for changed params (its content digest); its embedding and what follows it then follow its
    new store, as after any rerun."""
    screen, rule, edits = _rerun_screen(tmp_path, source)
    write_config(tmp_path, screen=screen, classify={"n_null_guides": 10})
    stores = [f"results/screen/plates/{p}.zarr" for p in RERUN_PLATES]
    snakemake(tmp_path, *stores)
    assert planned_plates(tmp_path, *stores) == []
    for i, (plate, edit) in enumerate(edits):
        if i:
            snakemake(tmp_path, *stores)  # the previous edit's plate ingested again
        edit()
        jobs = planned_plates(tmp_path, *stores)
        assert [(r, p) for r, p, _ in jobs] == [(rule, plate)], jobs
        assert "params have changed" in jobs[0][2].lower(), jobs
