"""The GPU code paths against the CPU ones (run only where CUDA is available).

CI has no GPU, so these tests skip there; they are run on a GPU machine (README, "Benchmarks":
the device check). The CPU paths they compare against are tested everywhere.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from phenoica.embed import PlateModel, embed_plate
from phenoica.models import NORMALIZE, OpenPhenomGeometry, build_feature_extractor, build_openphenom, train_mae
from tests.model_options import embed_options, train_options
from tests.test_embed import CHANNELS, embeddings, make_metadata, make_model, make_store
from tests.test_mae import SPEC, TRAIN, cell_tiles

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _embed(tmp_path: Path, store: Path, model: torch.nn.Module, device: str, **kw) -> pd.DataFrame:
    out = tmp_path / f"{device}_{kw.get('batch_size', 4)}.parquet"
    embed_plate(
        store, make_metadata(range(24)), PlateModel(model), out, embed_options(crop_size=8, device=device, **kw)
    )
    return pd.read_parquet(out)


def test_cuda_embedding_matches_the_cpu(tmp_path):
    """bf16 autocast on the GPU, preprocessing on the device: the same rows, features equal to
    the fp32 CPU features up to bf16 rounding (cosine > 0.999 per image)."""
    store, _ = make_store(tmp_path, n=24, size=16)
    model = make_model()
    cpu = _embed(tmp_path, store, model, "cpu", batch_size=4)
    gpu = _embed(tmp_path, store, model, "cuda", batch_size=4)
    meta = [c for c in cpu.columns if c.startswith("Metadata_")]
    pd.testing.assert_frame_equal(cpu[meta], gpu[meta])
    a, b = embeddings(cpu), embeddings(gpu)
    assert np.isfinite(b).all()
    assert _cosine_rows(a, b).min() > 0.999
    assert np.abs(a - b).max() < 0.05 * np.abs(a).max()


def test_cuda_embedding_does_not_depend_on_batch_size_or_loader_threads(tmp_path):
    store, _ = make_store(tmp_path, n=24, size=16)
    model = make_model()
    one = embeddings(_embed(tmp_path, store, model, "cuda", batch_size=4))
    other = embeddings(_embed(tmp_path, store, model, "cuda", batch_size=16, loader_threads=3))
    assert _cosine_rows(one, other).min() > 0.999


def test_openphenom_layout_on_cuda_matches_the_cpu():
    geometry = OpenPhenomGeometry(
        img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=3, mlp_ratio=4.0, max_in_chans=11
    )
    model = build_openphenom(geometry, seed=0).eval()
    x = torch.randn(6, 5, 32, 32)
    with torch.inference_mode():
        cpu = model.forward_features(x)[:, 1:].mean(1)
        gpu = model.cuda().forward_features(x.cuda())[:, 1:].mean(1).float().cpu()
    assert torch.allclose(cpu, gpu, atol=1e-3, rtol=1e-3), (cpu - gpu).abs().max()
    assert NORMALIZE  # the layout's recipe is importable where the GPU path runs


def test_mae_trains_on_cuda_and_its_checkpoint_loads_on_the_cpu(tmp_path):
    from phenoica.contract import write_plate

    plate = write_plate(tmp_path / "P1.zarr", cell_tiles(32), list(CHANNELS), chunk_images=8)
    train = dict(TRAIN, steps=60, batch_size=32, warmup_steps=5, log_every=20)
    summary = train_mae([plate], train_options(SPEC, seed=0, device="cuda", **train), out=tmp_path / "m.safetensors")
    assert summary["steps"] == 60 and np.isfinite(summary["final_loss"])
    assert summary["final_loss"] < summary["initial_loss"]
    state = load_file(str(tmp_path / "m.safetensors"))
    assert all(t.device.type == "cpu" and torch.isfinite(t.float()).all() for t in state.values())
    extractor = build_feature_extractor(SPEC, in_chans=3, checkpoint=tmp_path / "m.safetensors")
    with torch.no_grad():
        feats = extractor(torch.randn(2, 3, 16, 16))
    assert feats.shape == (2, SPEC["embed_dim"]) and torch.isfinite(feats).all()


def test_staging_round_trip_on_cuda():
    """Pinned upload on the side stream, the compute stream waiting for it, pinned download."""
    from phenoica.models import Staging

    staging = Staging(torch.device("cuda"))
    host = torch.arange(4096, dtype=torch.uint8).reshape(16, 256)
    item = staging.upload(host)
    assert item.tensor.device.type == "cuda" and item.done is not None
    on_device = staging.take(item).float() * 2
    np.testing.assert_array_equal(Staging.result(staging.download(on_device)), host.numpy().astype(np.float32) * 2)


def test_a_job_of_two_plates_on_cuda_matches_the_cpu(tmp_path):
    """embed_model_plates (the rule's function) on CUDA, model built once: both plates equal
    to the fp32 CPU features up to bf16 rounding; compiled with a compile cache folder."""
    from phenoica.embed import EmbedJob, PlateJob, embed_model_plates

    frames = {}
    for device, extra in (("cpu", {}), ("cuda", {"compile": True, "compile_cache": str(tmp_path / "cache")})):
        plates = []
        for i in range(2):
            store, _ = make_store(tmp_path / device, n=8, name=f"P{i + 1}.zarr", seed=i)
            out = tmp_path / device / f"P{i + 1}.parquet"
            plates.append(PlateJob(store, make_metadata(range(8), plate=f"P{i + 1}"), out))
        options = embed_options(SPEC, device=device, chunk_images=4, **extra)
        embed_model_plates(plates, EmbedJob("m", None, options))
        frames[device] = [embeddings(pd.read_parquet(p.out)) for p in plates]
    assert any((tmp_path / "cache").rglob("*"))  # the compile cache was written
    for cpu, gpu in zip(frames["cpu"], frames["cuda"]):
        assert _cosine_rows(cpu, gpu).min() > 0.999
