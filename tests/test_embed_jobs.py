"""Jobs of several plates (model built once, unchanged plates kept, resume after a kill), the
compile cache folder, the device fallback, the overlapped chunk loop's staging and timing."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

import phenoica.models._builders as features
from phenoica.contract import ScreenError, write_plate
from phenoica.embed import EmbedJob, EmbedTiming, PlateJob, embed_groups, embed_model_plates
from phenoica.embed._jobs import check_compile_cache, embed_model_plate
from phenoica.embed._parts import parts_dir
from phenoica.models import Staging, resolve_device
from tests.model_options import embed_options
from tests.test_embed import CHANNELS, embeddings, make_metadata, make_store
from tests.test_mae import SPEC

EMBED = {"device": "cpu", "chunk_images": 4}
BUILD = features.build_feature_extractor


class Builds:
    """Counts the models built and the crops they embed; raises after ``fail_after`` forwards."""

    def __init__(self, monkeypatch, fail_after: int | None = None):
        self.models, self.crops, self.calls, self.fail_after = 0, 0, 0, fail_after
        real = BUILD

        def build(*args, **kwargs):
            self.models += 1
            model = real(*args, **kwargs)
            forward = model.forward

            def counted(x):
                self.calls += 1
                if self.fail_after is not None and self.calls > self.fail_after:
                    raise KeyboardInterrupt("simulated kill")
                self.crops += x.shape[0]
                return forward(x)

            model.forward = counted
            return model

        monkeypatch.setattr(features, "build_feature_extractor", build)


def plates(tmp_path: Path, n: int = 2, images: int = 8) -> list[PlateJob]:
    jobs = []
    for i in range(n):
        name = f"P{i + 1}"
        store, _ = make_store(tmp_path, n=images, name=f"{name}.zarr", seed=i)
        jobs.append(PlateJob(store, make_metadata(range(images), plate=name), tmp_path / "out" / f"{name}.parquet"))
    return jobs


def job(**embed) -> EmbedJob:
    """A job of model entry ``SPEC`` with the ``embed`` keys ``EMBED`` and ``embed``, one thread."""
    return EmbedJob(model_name="m", checkpoint=None, options=embed_options(SPEC, **(EMBED | embed)), threads=1)


def test_embed_groups_are_consecutive_plates():
    groups = embed_groups(["a", "b", "c", "d", "e"], 2)
    assert groups == {"g0000": ["a", "b"], "g0001": ["c", "d"], "g0002": ["e"]}
    assert embed_groups(["a", "b"], 1) == {"g0000": ["a"], "g0001": ["b"]}
    with pytest.raises(ValueError, match="plates_per_job must be >= 1"):
        embed_groups(["a"], 0)


def test_a_job_of_two_plates_builds_one_model_and_equals_two_single_jobs(tmp_path, monkeypatch):
    builds = Builds(monkeypatch)
    group = plates(tmp_path)
    embed_model_plates(group, job())
    assert builds.models == 1 and builds.crops == 2 * 8
    assert not any(parts_dir(p.out).exists() for p in group)
    for plate in group:
        single = tmp_path / f"single_{plate.name}.parquet"
        embed_model_plate(plate.store, plate.metadata, single, job())
        np.testing.assert_array_equal(embeddings(pd.read_parquet(plate.out)), embeddings(pd.read_parquet(single)))
    assert builds.models == 3


def test_a_rerun_keeps_unchanged_plates_and_redoes_a_changed_one(tmp_path, monkeypatch, caplog):
    group = plates(tmp_path)
    embed_model_plates(group, job())
    first = {p.name: pd.read_parquet(p.out) for p in group}
    builds = Builds(monkeypatch)
    before = group[1].out.stat().st_mtime_ns
    with caplog.at_level(logging.INFO, logger="phenoica.embed"):
        embed_model_plates(group, job())  # nothing changed: no model, outputs refreshed (for Snakemake)
    assert builds.models == 0 and "plate P1: " in caplog.text and "is up to date" in caplog.text
    assert group[1].out.stat().st_mtime_ns >= before
    # plate P1's store is rewritten (same shape, other pixels): P1 alone is embedded again
    write_plate(group[0].store, make_store(tmp_path / "other", n=8, seed=7)[1], CHANNELS, chunk_images=4)
    embed_model_plates(group, job())
    assert builds.models == 1 and builds.crops == 8
    pd.testing.assert_frame_equal(pd.read_parquet(group[1].out), first["P2"])
    assert not np.allclose(embeddings(pd.read_parquet(group[0].out)), embeddings(first["P1"]))
    # a changed setting that changes the numbers (intensity_max) redoes both
    embed_model_plates(group, job(intensity_max=128))
    assert builds.models == 2 and builds.crops == 8 + 16


def test_a_killed_job_resumes_without_redoing_finished_plates_or_chunks(tmp_path, monkeypatch):
    group = plates(tmp_path)
    Builds(monkeypatch, fail_after=3)  # plate P1: 2 chunks of 4 images; P2: its first chunk, then killed
    with pytest.raises(KeyboardInterrupt):
        embed_model_plates(group, job(batch_size=4))
    assert group[0].out.exists() and parts_dir(group[0].out).exists()  # finished plate: parts kept
    assert not group[1].out.exists() and len(list(parts_dir(group[1].out).glob("chunk_*"))) == 1
    group[0].out.unlink()  # Snakemake removes the outputs of a failed job
    builds = Builds(monkeypatch)
    embed_model_plates(group, job(batch_size=4))
    assert builds.crops == 4  # only P2's last chunk; P1 assembled from its parts
    reference = tmp_path / "ref.parquet"
    embed_model_plate(group[0].store, group[0].metadata, reference, EmbedJob("m", None, embed_options(SPEC, **EMBED)))
    np.testing.assert_allclose(
        embeddings(pd.read_parquet(group[0].out)), embeddings(pd.read_parquet(reference)), atol=1e-6
    )
    assert not any(parts_dir(p.out).exists() for p in group)


def test_plates_with_different_channel_sets_are_refused_before_any_work(tmp_path, monkeypatch):
    builds = Builds(monkeypatch)
    group = plates(tmp_path)
    tiles = np.zeros((8, 2, 16, 16), dtype=np.uint8)
    other = write_plate(tmp_path / "P3.zarr", tiles, ["dna", "er"], chunk_images=4)
    group.append(PlateJob(other, make_metadata(range(8), plate="P3"), tmp_path / "out" / "P3.parquet"))
    with pytest.raises(
        ScreenError, match=r"different channel sets.*plates \['P1', 'P2'\].*\['dna', 'er'\]: plates \['P3'\]"
    ):
        embed_model_plates(group, job())
    assert builds.models == 0 and not (tmp_path / "out").exists()
    named = EmbedJob("m", None, embed_options(dict(SPEC, channels=["actin"]), **EMBED))
    with pytest.raises(ScreenError, match=r"P3.zarr: channel\(s\) \['actin'\] named by config key models.m.channels"):
        embed_model_plates(group, named)
    assert builds.models == 0 and not (tmp_path / "out").exists()


def test_an_unwritable_compile_cache_fails_before_any_plate(tmp_path, monkeypatch):
    builds = Builds(monkeypatch)
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with pytest.raises(ValueError, match=r"embed.compile_cache: .*a_file/cache is not a writable folder"):
        embed_model_plates(plates(tmp_path), job(compile=True, compile_cache=str(blocker / "cache")))
    assert builds.models == 0 and not (tmp_path / "out").exists()
    assert check_compile_cache(tmp_path / "ok" / "cache").is_dir()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_a_cuda_request_without_cuda_fails_or_falls_back_as_configured(tmp_path, monkeypatch, caplog):
    builds = Builds(monkeypatch)
    group = plates(tmp_path, n=1)
    with pytest.raises(
        ValueError, match=r"device 'cuda' requested \(config key embed.device\).*embed.without_cuda: cpu"
    ):
        embed_model_plates(group, job(device="cuda"))
    assert builds.models == 0 and not group[0].out.exists()
    with caplog.at_level(logging.WARNING, logger="phenoica.embed"):
        embed_model_plates(group, job(device="cuda", without_cuda="cpu"))
    assert "falling back to the CPU" in caplog.text and group[0].out.exists()
    with pytest.raises(ValueError, match="embed.without_cuda must be one of"):
        resolve_device("cuda", "maybe")


def test_staging_on_the_cpu_is_the_identity():
    staging = Staging(torch.device("cpu"))
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    item = staging.upload(x)
    assert item.done is None and staging.take(item) is x
    np.testing.assert_array_equal(Staging.result(staging.download(x * 2)), (x * 2).numpy())


def test_the_timing_names_the_phase_left():
    base = {"images": 10, "chunks": 2, "wall_s": 10.0, "waiting_for_writes_s": 0.0}
    assert EmbedTiming(**base, waiting_for_data_s=6.0, model_s=3.0).left == "reading"
    assert EmbedTiming(**base, waiting_for_data_s=1.0, model_s=8.0).left == "forward"
    gpu = EmbedTiming(
        **base, waiting_for_data_s=1.0, model_s=0.5, waiting_for_results_s=8.0, device_wait_s=7.0, write_s=1.0
    )
    assert gpu.left == "forward"  # the loop waited on the device's forward
    slow_disk = EmbedTiming(**base, waiting_for_data_s=1.0, model_s=0.5, waiting_for_results_s=8.0, write_s=7.0)
    assert slow_disk.left == "writing"


def test_the_closing_line_says_where_the_time_went(tmp_path, caplog):
    group = plates(tmp_path, n=1)
    with caplog.at_level(logging.INFO, logger="phenoica.embed"):
        embed_model_plates(group, job(loader_threads=2))
    line = next(r.getMessage() for r in caplog.records if "background:" in r.getMessage())
    assert "waiting for data" in line and "read" in line and "preprocess" in line and "left: " in line


@pytest.mark.slow
def test_the_workflow_embeds_a_group_of_plates_in_one_job_and_reruns_only_a_changed_plate(tmp_path):
    """embed.plates_per_job: 2: one job (rule embed_g0000) writes both plates' files; after one
    plate's metadata changes the job reruns, embeds that plate and keeps the other's file."""
    from tests.test_workflow import planned_jobs, snakemake, write_config

    write_config(tmp_path, demo={"n_batches": 2}, embed={"plates_per_job": 2})
    cfg = yaml.safe_load((tmp_path / "config.yaml").read_text())
    cfg["models"] = {"mae": cfg["models"]["mae"]}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    targets = [f"results/embed/mae/B0{b}P01.parquet" for b in (1, 2)]
    snakemake(tmp_path, *targets)
    log = tmp_path / "results" / "logs" / "embed" / "mae" / "g0000.log"
    assert log.read_text().count("plate 1/2 of this job") == 1 and all((tmp_path / t).exists() for t in targets)
    kept = pd.read_parquet(tmp_path / targets[1])
    meta = tmp_path / "results" / "screen" / "metadata" / "B01P01.parquet"
    rows = pd.read_parquet(meta)
    rows.loc[rows["Metadata_Well"] == rows.loc[0, "Metadata_Well"], "Metadata_Guide"] = "renamed"
    rows.to_parquet(meta, index=False)
    # as if the plate's job had written it: its receipt (benchmark file) after the file, so the
    # results folder's check of untrusted outputs keeps it (phenoica.workflow._provenance)
    receipt = tmp_path / "results" / "benchmarks" / "simulate_plate" / "B01P01.tsv"
    os.utime(receipt, ns=(meta.stat().st_mtime_ns + 1_000_000, meta.stat().st_mtime_ns + 1_000_000))
    assert planned_jobs(tmp_path, "--", *targets) == {"embed_g0000": 1}
    snakemake(tmp_path, *targets)
    text = log.read_text()
    assert "plate B02P01: results/embed/mae/B02P01.parquet is up to date" in text
    assert "job: plate 1/1 of this job (B01P01)" in text
    assert pd.read_parquet(tmp_path / targets[0])["Metadata_Guide"].iloc[0] == "renamed"
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / targets[1]), kept)


def test_an_embedding_job_reruns_for_what_changes_its_numbers_only():
    """The embed params (the options' repr) leave out the speed keys and hold the model's entry
    and the keys that change the embeddings."""
    base = embed_options(SPEC)
    fast = embed_options(SPEC, batch_size=7, chunk_images=3, loader_threads=2, threads=1, compile=True)
    assert repr(base) == repr(fast._replace(compile_options={"a": 1}, compile_cache="cache"))
    assert repr(base) != repr(embed_options(SPEC, intensity_max=128))
    assert repr(base) != repr(embed_options(dict(SPEC, pool="cls")))
    assert base.spec == SPEC and job().spec == SPEC
