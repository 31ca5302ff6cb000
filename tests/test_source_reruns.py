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


# --------------------------------------------------------------------------- content keys of the user's files
# A changed file reruns what reads it whatever its time or link; an output phenoica did not write
# is not trusted (phenoica.workflow._digests, phenoica.workflow._provenance).


def _replace_keeping_times(path: Path, data: bytes) -> None:
    """``path`` replaced by ``data`` with its old modification time, as ``cp -p`` or ``rsync -a`` leave it."""
    import os

    st = path.stat()
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, path)


def test_a_files_key_follows_its_bytes_not_its_time_or_link(tmp_path, monkeypatch):
    """The content key of a user's file changes when its bytes change, also with the old time kept
    or behind a symlink pointed elsewhere; a copy of the same bytes keys the same; a file left
    alone is not read again (the cache), and a file changed a moment ago is never cached."""
    import os
    import shutil

    from phenoica.workflow import KeyCache

    keys = KeyCache(tmp_path / "keys.json", racy_seconds=0)
    data = tmp_path / "data"
    data.mkdir()
    f = data / "a.parquet"
    f.write_bytes(b"one" * 1000)
    first = keys.key(f)
    _replace_keeping_times(f, b"two" * 1000)  # same size, same time, other bytes
    second = keys.key(f)
    assert second != first
    shutil.copy2(f, tmp_path / "copy")
    os.replace(tmp_path / "copy", f)  # re-staged: new inode, same bytes
    assert keys.key(f) == second
    link = tmp_path / "link.parquet"
    (data / "b.parquet").write_bytes(b"one" * 1000)
    link.symlink_to(f)
    assert keys.key(link) == second
    link.unlink()
    link.symlink_to(data / "b.parquet")
    assert keys.key(link) == first
    assert keys.key(tmp_path / "absent") == ""
    folder = keys.key(data)  # a folder (a partitioned Parquet dataset) is keyed as a store
    (data / "c.parquet").write_bytes(b"three")
    assert folder and keys.key(data) != folder
    keys.save()
    again = KeyCache(tmp_path / "keys.json", racy_seconds=0)
    assert again.entries[str(f)][1] == second
    with monkeypatch.context() as m:  # a file left alone is not read again
        m.setattr("hashlib.file_digest", None)
        assert again.key(f) == second and not again.changed
    fresh = KeyCache(tmp_path / "fresh.json")  # the default window: a file just written is not cached
    assert fresh.key(f) == second and str(f) not in fresh.entries


def test_a_chunk_replaced_with_its_time_kept_changes_its_stores_key(tmp_path):
    """A store's key (the param of the plate's first rule and of train_mae) notices a chunk that is
    not among the sampled ones replaced by other bytes of the same size with its time kept."""
    import numpy as np

    from phenoica.contract import write_plate
    from phenoica.workflow import store_digest

    tiles = np.random.default_rng(0).integers(0, 255, size=(16, 1, 8, 8), dtype=np.uint8)
    store = write_plate(tmp_path / "P1.zarr", tiles, ["a"], chunk_images=1)
    chunks = sorted(p for p in store.rglob("*") if p.is_file() and p.name != "zarr.json")
    before = store_digest(store)
    chunk = chunks[1]  # every fourth chunk is sampled (0, 4, 8, 12): chunk 1 is read by its stat alone
    data = bytearray(chunk.read_bytes())
    data[-1] ^= 0xFF
    _replace_keeping_times(chunk, bytes(data))
    assert store_digest(store) != before


def test_rules_take_the_content_keys_of_the_users_files(tmp_path):
    """The params that key gather_profiles, embed, apply_transform, biomap and the report on
    the user's files: empty for the files the workflow writes, changed by a file replaced."""
    from types import SimpleNamespace

    from phenoica.contract import run_models, validate_config
    from phenoica.workflow import RuleInputs
    from phenoica.workflow._digests import NOT_KEYED

    emb = tmp_path / "emb"
    emb.mkdir()
    for name in ("B1", "B2"):
        (emb / f"{name}.parquet").write_bytes(name.encode() * 100)
    (tmp_path / "frozen" / "ext").mkdir(parents=True)
    for variant in ("base", "pca"):
        (tmp_path / "frozen" / "ext" / f"{variant}.npz").write_bytes(variant.encode())
    (tmp_path / "w.safetensors").write_bytes(b"weights")
    cfg = validate_config(
        run_models(
            {
                "results": str(tmp_path / "res"),
                "screen": {"source": "embeddings", "embeddings": str(emb / "*.parquet")},
                "models": {"ext": {"checkpoint": str(tmp_path / "w.safetensors")}},
                "transforms": {"variants": ["base", "pca"], "frozen": str(tmp_path / "frozen")},
            }
        )
    )
    inputs = RuleInputs(cfg, {})
    job = SimpleNamespace(model="ext", variant="pca")
    before = (inputs.embeddings_key("ext"), inputs.checkpoint_key("ext"), inputs.transforms_key(job))
    assert all(isinstance(k, str) for k in before) and inputs.training_stores_key("ext") is NOT_KEYED
    _replace_keeping_times(emb / "B2.parquet", b"B3" * 100)
    _replace_keeping_times(tmp_path / "frozen" / "ext" / "pca.npz", b"pcb")
    _replace_keeping_times(tmp_path / "w.safetensors", b"weighty")
    after = (inputs.embeddings_key("ext"), inputs.checkpoint_key("ext"), inputs.transforms_key(job))
    assert all(a != b for a, b in zip(after, before))
    assert inputs.transforms_key(SimpleNamespace(model="ext", variant="base")) != after[2]
    assert inputs.report_files_key() != inputs.annotations_key()  # the frozen fit reports (absent here)
    # the workflow's own files are not keyed: the param is left out of Snakemake's record
    demo = RuleInputs(validate_config({"results": str(tmp_path / "r2")}), {"P1": "B1"})
    for key in (demo.embeddings_key("mae"), demo.checkpoint_key("mae"), demo.report_files_key()):
        assert key is NOT_KEYED
    from snakemake.persistence import UNREPRESENTABLE, PersistenceBase

    assert PersistenceBase._serialize_param_builtin(None, NOT_KEYED) is UNREPRESENTABLE  # what Snakemake relies on


def test_an_output_newer_than_its_jobs_benchmark_file_is_set_aside(tmp_path):
    """An output newer than its job's benchmark file, or without one, was not written by that
    job: it is moved below .phenoica/set-aside (kept, never deleted) and named in a note; one
    written before its benchmark file (as Snakemake touches them) is left alone, and so is one
    whose job's log is newer than its benchmark file (a job killed after writing it: Snakemake
    redoes it)."""
    import os

    from phenoica.workflow._provenance import SET_ASIDE, RuleFiles, set_aside, untrusted_outputs

    res = tmp_path / "res"
    for rel in ("profiles/a.parquet", "profiles/b.parquet", "profiles/c.parquet", "benchmarks/g/a.tsv"):
        (res / rel).parent.mkdir(parents=True, exist_ok=True)
        (res / rel).write_text(rel)
    (res / "benchmarks" / "g" / "b.tsv").write_text("b")
    (res / "report" / "figures").mkdir(parents=True)
    (res / "report" / "figures" / ".snakemake_timestamp").write_text("")
    (res / "benchmarks" / "report.tsv").write_text("r")
    receipt = (res / "benchmarks" / "g" / "b.tsv").stat().st_mtime_ns
    os.utime(res / "profiles" / "b.parquet", ns=(0, receipt + 10**9))
    # d: written by a job that was killed after it (its log newer than its last receipt)
    (res / "profiles" / "d.parquet").write_text("d")
    (res / "benchmarks" / "g" / "d.tsv").write_text("d")
    (res / "logs" / "g").mkdir(parents=True)
    (res / "logs" / "g" / "d.log").write_text("started")
    os.utime(res / "benchmarks" / "g" / "d.tsv", ns=(0, receipt - 10**9))
    os.utime(res / "profiles" / "d.parquet", ns=(0, receipt))
    os.utime(res / "logs" / "g" / "d.log", ns=(0, receipt))
    rules = [
        RuleFiles(
            "g",
            (f"{res}/profiles/{{model,[^/]+}}.parquet",),
            f"{res}/benchmarks/g/{{model,[^/]+}}.tsv",
            log=f"{res}/logs/g/{{model}}.log",
        ),
        RuleFiles(
            "report",
            (f"{res}/report/figures",),
            f"{res}/benchmarks/report.tsv",
            frozenset({f"{res}/report/figures"}),
        ),
    ]
    found = untrusted_outputs(rules)
    assert found == [
        (f"{res}/profiles/b.parquet", f"{res}/benchmarks/g/b.tsv"),  # newer than its benchmark file
        (f"{res}/profiles/c.parquet", f"{res}/benchmarks/g/c.tsv"),  # no benchmark file
    ]
    notes = set_aside(res, found)
    assert not (res / "profiles" / "b.parquet").exists() and (res / "profiles" / "a.parquet").exists()
    kept = sorted((res / SET_ASIDE).rglob("*.parquet"))
    assert [p.read_text() for p in kept] == ["profiles/b.parquet", "profiles/c.parquet"]
    assert "profiles/b.parquet is newer than its job's benchmark file" in notes[0]
    assert (
        "profiles/c.parquet has no benchmark file" in notes[1]
        and "rebuilt by this run, with the jobs that read it" in notes[1]
    )
    assert untrusted_outputs(rules) == []


@pytest.mark.slow
def test_user_files_rerun_what_reads_them_whatever_their_time_or_link(tmp_path):
    """Source embeddings through Snakemake: an embedding file replaced by other values with its
    old time (cp -p) plans the gather (params changed) and what follows; the same bytes copied
    anew plan nothing; a symlink pointed at another file plans the gather; a profile table put in
    the results folder, newer than everything, is set aside and rebuilt; a frozen transform
    replaced with its old time plans its apply_transform job."""
    import os
    import shutil

    import numpy as np

    from phenoica.screen.scenarios import write_embeddings

    files = write_embeddings(tmp_path / "store", 0)
    (tmp_path / "emb").mkdir()
    for f in files:
        (tmp_path / "emb" / f.name).symlink_to(f)
    base = {
        "seed": 0,
        "screen": {"source": "embeddings", "embeddings": "emb/*.parquet", "embedding_column": "vector"},
        "models": {"ext": {}},
        "transforms": {"n_components": 6, "variants": ["base", "pca"]},
        "classify": {"n_shards": 1, "num_boost_round": 20, "n_null_guides": 20, "min_train_samples": 3},
        "sweep": {"points": 0},
    }
    import yaml

    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**base, "results": "results"}))
    target = "results/transforms/ext/pca.parquet"

    def planned() -> list[tuple[str, str]]:
        out = snakemake(tmp_path, "-n", target).stdout
        return re.findall(r"^rule (\w+):\n(?:\s+.*\n)*?\s+reason: (.*)", out, flags=re.M)

    def scaled(path: Path, factor: float) -> bytes:
        t = pd.read_parquet(path)
        t["vector"] = [np.asarray(v) * factor for v in t["vector"]]
        t.to_parquet(tmp_path / "scaled.parquet")
        return (tmp_path / "scaled.parquet").read_bytes()

    snakemake(tmp_path, target)
    assert planned() == []
    _replace_keeping_times(files[1], scaled(files[1], 1.5))
    jobs = planned()
    assert [r for r, _ in jobs] == ["gather_profiles", "fit_transforms", "apply_transform"], jobs
    assert "params have changed" in jobs[0][1].lower()
    snakemake(tmp_path, target)
    shutil.copy2(files[1], tmp_path / "again.parquet")
    os.replace(tmp_path / "again.parquet", files[1])  # the same bytes, a new file
    assert planned() == []
    other = tmp_path / "store" / "other.parquet"
    other.write_bytes(scaled(files[2], 2.0))
    os.utime(other, ns=(0, files[2].stat().st_mtime_ns))
    link = tmp_path / "emb" / files[2].name
    link.unlink()
    link.symlink_to(other)
    os.utime(link, ns=(0, 0), follow_symlinks=False)
    assert [r for r, _ in planned()][:1] == ["gather_profiles"]
    snakemake(tmp_path, target)
    profile = tmp_path / "results" / "profiles" / "ext.parquet"
    shutil.copy(tmp_path / "scaled.parquet", profile)  # another table, newer than everything
    out = snakemake(tmp_path, "-n", "results/profiles/ext.parquet")  # a dry run says so and moves nothing
    assert "profiles/ext.parquet is newer than its job's benchmark file" in out.stderr + out.stdout
    assert "left in place by this dry run" in out.stderr + out.stdout and profile.exists()
    out = snakemake(tmp_path, "results/profiles/ext.parquet")  # a run sets it aside and rebuilds it
    assert "rule gather_profiles:" in out.stdout + out.stderr
    aside = [p.read_bytes() for p in (tmp_path / "results" / ".phenoica" / "set-aside").rglob("ext.parquet")]
    put = (tmp_path / "scaled.parquet").read_bytes()
    assert put in aside and profile.read_bytes() != put  # kept aside, and the table rebuilt
    snakemake(tmp_path, target)
    # frozen transforms: the fitted ones applied by a second results folder
    shutil.copytree(
        tmp_path / "results" / "transforms", tmp_path / "frozen", ignore=shutil.ignore_patterns("*.parquet")
    )
    frozen = {**base, "results": "results2", "transforms": {**base["transforms"], "frozen": "frozen"}}
    (tmp_path / "frozen.yaml").write_text(yaml.safe_dump(frozen))
    snakemake(tmp_path, "results2/transforms/ext/pca.parquet", configfile="frozen.yaml")
    npz = tmp_path / "frozen" / "ext" / "pca.npz"
    arrays = dict(np.load(npz))
    arrays["whitener.mean_"] = arrays["whitener.mean_"] + 1.0
    np.savez(tmp_path / "other.npz", **arrays)
    _replace_keeping_times(npz, (tmp_path / "other.npz").read_bytes())
    out = snakemake(tmp_path, "-n", "results2/transforms/ext/pca.parquet", configfile="frozen.yaml").stdout
    assert re.search(r"rule apply_transform:\n(?:\s+.*\n)*?\s+reason: Params have changed", out), out
