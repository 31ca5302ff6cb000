"""The published OpenPhenom layout against an independent forward pass written here with timm's
own classes: random weights saved as the public file is (torch pickle under ``state_dict``,
``encoder.vit_backbone.*`` + decoder keys) and as safetensors, embedded through the workflow's
embed function with the public recipe (pixels / 255, instance norm per crop, patch-token mean,
512 px = mean of four 256 px crops)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import save_file
from timm.models.vision_transformer import ParallelScalingBlock, VisionTransformer
from torch import nn

from phenoica.contract import ScreenError, validate_config, write_plate
from phenoica.embed import EmbedJob, EmbedOptions, embedding_metadata
from phenoica.embed._jobs import embed_model_plate
from phenoica.models import CheckpointError, OpenPhenomGeometry, build_feature_extractor, build_openphenom
from phenoica.models._layers import SharedChannelPatchEmbed
from phenoica.models._openphenom import geometry_from_state, sincos_table
from tests.model_options import embed_options

STORE_CHANNELS = ["Mito", "DNA", "ER", "AGP", "RNA"]
MODEL_CHANNELS = ["DNA", "ER", "RNA", "AGP", "Mito"]  # the model's order, a permutation of the store's
TINY = dict(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=3, mlp_ratio=4.0, max_in_chans=11)
FULL = dict(img_size=256, patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4.0, max_in_chans=11)


# ----------------------------------------------------------------- the independent reference


def sincos_numpy(grid: int, dim: int, max_chans: int) -> np.ndarray:
    """(1, 1 + max_chans * grid^2, dim): zero class row, then [sin h, cos h, sin w, cos w] per patch,
    repeated per channel (the layout the public code builds)."""
    quarter = dim // 4
    omega = 1.0 / 10000.0 ** (np.arange(quarter) / quarter)
    hh, ww = np.meshgrid(np.arange(grid), np.arange(grid), indexing="ij")
    h, w = np.outer(hh.ravel(), omega), np.outer(ww.ravel(), omega)
    table = np.concatenate([np.sin(h), np.cos(h), np.sin(w), np.cos(w)], axis=1)
    return np.concatenate([np.zeros((1, dim)), np.tile(table, (max_chans, 1))])[None].astype(np.float32)


def reference_encoder(geo: dict, seed: int = 0) -> VisionTransformer:
    """A timm ViT built as the public vit_small_patch16_256 is, with random (non-trivial) weights."""
    torch.manual_seed(seed)
    vit = VisionTransformer(
        img_size=geo["img_size"],
        patch_size=geo["patch_size"],
        in_chans=1,
        num_classes=0,
        embed_dim=geo["embed_dim"],
        depth=geo["depth"],
        num_heads=geo["num_heads"],
        mlp_ratio=geo["mlp_ratio"],
        qkv_bias=False,
        qk_norm=True,
        init_values=1e-4,
        block_fn=ParallelScalingBlock,
        class_token=True,
        global_pool="avg",
        fc_norm=None,
    ).eval()
    grid = geo["img_size"] // geo["patch_size"]
    vit.pos_embed = nn.Parameter(
        torch.from_numpy(sincos_numpy(grid, geo["embed_dim"], geo["max_in_chans"])), requires_grad=False
    )
    with torch.no_grad():
        for name, p in vit.named_parameters():
            if name == "pos_embed":
                continue
            if name.endswith("ls.gamma"):
                p.copy_(0.5 + 0.1 * torch.randn_like(p))  # away from 1e-4, so every block matters
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.1 * torch.randn_like(p))
    return vit


def reference_embedding(vit: VisionTransformer, x: torch.Tensor) -> torch.Tensor:
    """Channel-agnostic forward of normalized crops x (B, C, s, s): one projection per channel,
    tokens channel-major, class token + the first 1 + C*N position rows, blocks, patch-token mean."""
    b, c = x.shape[:2]
    tokens = torch.stack([vit.patch_embed.proj(x[:, i : i + 1]) for i in range(c)], dim=2)  # B, D, C, g, g
    tokens = tokens.flatten(2).transpose(1, 2)
    tokens = torch.cat([vit.cls_token.expand(b, -1, -1), tokens], dim=1)
    tokens = tokens + vit.pos_embed[:, : tokens.shape[1]]
    out = vit.norm(vit.blocks(vit.norm_pre(tokens)))
    return out[:, 1:].mean(dim=1)


def reference_image_embeddings(vit: VisionTransformer, tiles: np.ndarray, crop: int) -> np.ndarray:
    """The public recipe per image: pixels / 255, non-overlapping crops, InstanceNorm2d per crop,
    embedding of each crop, mean over the image's crops."""
    x = torch.from_numpy(tiles).float() / 255.0
    norm = nn.InstanceNorm2d(tiles.shape[1], affine=False, track_running_stats=False)
    n, _, h, w = x.shape
    per_crop = []
    with torch.no_grad():
        for top in range(0, h - crop + 1, crop):
            for left in range(0, w - crop + 1, crop):
                per_crop.append(reference_embedding(vit, norm(x[:, :, top : top + crop, left : left + crop])))
    return torch.stack(per_crop).mean(dim=0).numpy()


def published_state(vit: VisionTransformer, seed: int = 1) -> dict[str, torch.Tensor]:
    """The file's tensors: encoder.vit_backbone.* beside random MAE decoder parts."""
    g = torch.Generator().manual_seed(seed)
    state = {f"encoder.vit_backbone.{k}": v.detach().clone().contiguous() for k, v in vit.state_dict().items()}
    dim = vit.embed_dim
    state.update(
        {
            "decoder.mask_token": torch.randn(1, 1, 32, generator=g),
            "decoder.blocks.0.0.attn.qkv.weight": torch.randn(96, 32, generator=g),
            "decoder.pos_embeddings": torch.randn(1, 17, 32, generator=g),
            "encoder_decoder_proj.weight": torch.randn(32, dim, generator=g),
            "encoder_decoder_proj.bias": torch.randn(32, generator=g),
            "decoder_pred.weight": torch.randn(64, 32, generator=g),
            "decoder_pred.bias": torch.randn(64, generator=g),
        }
    )
    return state


def save_all_ways(state: dict[str, torch.Tensor], folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "pickle": folder / "openphenom.pth",
        "safetensors": folder / "openphenom.safetensors",
        "pickle_named_safetensors": folder / "model.safetensors",
    }
    torch.save({"state_dict": state}, files["pickle"])
    save_file(state, str(files["safetensors"]))
    torch.save({"state_dict": state}, files["pickle_named_safetensors"])
    return files


def metadata(n: int, plate: str = "P1") -> pd.DataFrame:
    return pd.DataFrame(
        {
            "Metadata_Batch": "B1",
            "Metadata_Plate": plate,
            "Metadata_Well": [f"A{i:02d}" for i in range(n)],
            "Metadata_Site": 1,
            "Metadata_Gene": "NTC",
            "Metadata_Guide": "NTC_1",
            "Metadata_PertType": "control",
            "Metadata_ImageIndex": np.arange(n),
        }
    )


def model_entry(checkpoint: Path, **extra) -> dict:
    return validate_config({"models": {"op": {"checkpoint": str(checkpoint), "channels": MODEL_CHANNELS, **extra}}})[
        "models"
    ]["op"]


def op_job(spec: dict, checkpoint: Path, **embed) -> EmbedJob:
    """The embedding job of model ``op`` (entry ``spec``, weights from ``checkpoint``) with these
    ``embed`` keys, one thread."""
    options = EmbedOptions.from_config(validate_config({"models": {"op": spec}, "embed": embed}), model="op")
    return EmbedJob("op", checkpoint, options, threads=1)


# ----------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Reduced geometry of the layout (same code path): files, a 5-channel plate of 64 px images
    (four 32 px crops each) and the reference embeddings."""
    folder = tmp_path_factory.mktemp("openphenom")
    vit = reference_encoder(TINY)
    files = save_all_ways(published_state(vit), folder / "ckpt")
    tiles = np.random.default_rng(0).integers(0, 256, (6, len(STORE_CHANNELS), 64, 64), dtype=np.uint8)
    store = write_plate(folder / "P1.zarr", tiles, STORE_CHANNELS, chunk_images=4)
    order = [STORE_CHANNELS.index(c) for c in MODEL_CHANNELS]
    want = reference_image_embeddings(vit, tiles[:, order], TINY["img_size"])
    return {"vit": vit, "files": files, "store": store, "tiles": tiles, "want": want, "folder": folder}


def embed(tiny, checkpoint: Path, out: Path, caplog=None, **extra) -> pd.DataFrame:
    embed_model_plate(
        tiny["store"],
        metadata(6),
        out,
        op_job(model_entry(checkpoint, **extra), checkpoint, device="cpu", batch_size=5),
        log=logging.getLogger("phenoica.embed"),
    )
    return pd.read_parquet(out)


# ----------------------------------------------------------------- the layout, both file formats


@pytest.mark.parametrize("fmt", ["pickle", "safetensors", "pickle_named_safetensors"])
def test_embeddings_equal_an_independent_timm_forward(tiny, tmp_path, caplog, fmt):
    with caplog.at_level(logging.INFO):
        df = embed(tiny, tiny["files"][fmt], tmp_path / "P1.parquet")
    got = df.filter(like="emb_").to_numpy()
    assert got.shape == tiny["want"].shape == (6, TINY["embed_dim"])
    assert np.abs(got - tiny["want"]).max() < 1e-4
    assert "ignoring 7 MAE decoder key(s) (decoder.*, decoder_pred.*, encoder_decoder_proj.*)" in caplog.text
    if fmt == "pickle_named_safetensors":
        assert "is a torch checkpoint despite its .safetensors name" in caplog.text
    meta = embedding_metadata(tmp_path / "P1.parquet")
    assert meta["architecture"] == "openphenom" and meta["normalize"] == "crop" and meta["channels"] == MODEL_CHANNELS
    assert meta["pool"] == "mean" and meta["block"] is None and meta["per_channel"] is False


def test_shared_channel_patch_embed_known_answer():
    pe = SharedChannelPatchEmbed(img_size=4, patch_size=2, in_chans=3, embed_dim=2)
    assert list(pe.state_dict()) == ["proj.weight", "proj.bias"] and pe.num_patches == 3 * 4
    with torch.no_grad():
        pe.proj.weight.fill_(1.0)
        pe.proj.bias.copy_(torch.tensor([0.0, 1.0]))
        x = torch.arange(2 * 16, dtype=torch.float32).reshape(2, 1, 4, 4).repeat(1, 2, 1, 1)
        x[:, 1] *= 10  # channel 1 = ten times channel 0
        tokens = pe(x)
    assert tokens.shape == (2, 2 * 4, 2)  # two channels, four patches each, channel-major
    first = torch.tensor([0 + 1 + 4 + 5, 2 + 3 + 6 + 7, 8 + 9 + 12 + 13, 10 + 11 + 14 + 15], dtype=torch.float32)
    assert torch.equal(tokens[0, :4, 0], first) and torch.equal(tokens[0, 4:, 0], 10 * first)
    assert torch.equal(tokens[..., 1], tokens[..., 0] + 1)
    with pytest.raises(ScreenError, match="channel-shared encoder embeds at most 3 channels, got 4"):
        pe(torch.zeros(1, 4, 4, 4))
    with pytest.raises(ScreenError, match="expects 4x4 crops, got 2x2"):
        pe(torch.zeros(1, 1, 2, 2))
    model = build_openphenom(OpenPhenomGeometry(**TINY))
    assert type(model.patch_embed) is SharedChannelPatchEmbed and model.patch_embed.max_chans == 11
    assert [k for k in model.state_dict() if k.startswith("patch_embed.")] == [
        "patch_embed.proj.weight",
        "patch_embed.proj.bias",
    ]
    with pytest.raises(ScreenError, match=r"OpenPhenom encoder \(max_in_chans\) embeds at most 11 channels, got 12"):
        model.patch_embed(torch.zeros(1, 12, 32, 32))


def test_geometry_is_read_from_the_checkpoint(tiny):
    state = {k.removeprefix("encoder.vit_backbone."): v for k, v in tiny["vit"].state_dict().items()}
    assert geometry_from_state(state, "x") == OpenPhenomGeometry(**TINY)
    # the table the module builds is the public one (row 0 is the class token's zero row)
    np.testing.assert_allclose(sincos_table(4, 48).numpy(), sincos_numpy(4, 48, 1)[0, 1:], atol=1e-6)


def test_explicit_architecture_and_the_channels_the_recipe_drops(tiny, tmp_path):
    df = embed(tiny, tiny["files"]["safetensors"], tmp_path / "a.parquet", architecture="openphenom")
    assert np.abs(df.filter(like="emb_").to_numpy() - tiny["want"]).max() < 1e-4
    # three of the five channels: the model is channel-agnostic, the reference sees the same three
    three = ["DNA", "RNA", "Mito"]
    spec = model_entry(tiny["files"]["pickle"]) | {"channels": three}
    out = tmp_path / "b.parquet"
    embed_model_plate(
        tiny["store"],
        metadata(6),
        out,
        op_job(spec, tiny["files"]["pickle"], device="cpu"),
    )
    want = reference_image_embeddings(tiny["vit"], tiny["tiles"][:, [STORE_CHANNELS.index(c) for c in three]], 32)
    assert np.abs(pd.read_parquet(out).filter(like="emb_").to_numpy() - want).max() < 1e-4


def test_per_channel_embeddings_are_named_by_channel_and_average_to_the_pooled_one(tiny, tmp_path):
    df = embed(tiny, tiny["files"]["pickle"], tmp_path / "pc.parquet", per_channel=True)
    features = [c for c in df.columns if not c.startswith("Metadata_")]
    assert features[:2] == ["emb_DNA_0000", "emb_DNA_0001"] and features[-1] == "emb_Mito_0047"
    assert len(features) == 5 * 48
    per = df[features].to_numpy().reshape(6, 5, 48)
    # every channel has the same number of tokens, so the mean of the channels' means is the pooled mean
    assert np.abs(per.mean(axis=1) - tiny["want"]).max() < 1e-4
    assert not np.allclose(per[:, 0], per[:, 1], atol=1e-3)
    assert embedding_metadata(tmp_path / "pc.parquet")["per_channel"] is True


def test_class_token_and_earlier_block(tiny):
    x = torch.randn(2, 3, 32, 32)
    fx_cls = build_feature_extractor(model_entry(tiny["files"]["pickle"], pool="cls"), 3, tiny["files"]["pickle"])
    fx_b0 = build_feature_extractor(model_entry(tiny["files"]["pickle"], block=0), 3, tiny["files"]["pickle"])
    vit = tiny["vit"]
    with torch.no_grad():
        tokens = (
            torch.stack([vit.patch_embed.proj(x[:, i : i + 1]) for i in range(3)], dim=2).flatten(2).transpose(1, 2)
        )
        tokens = torch.cat([vit.cls_token.expand(2, -1, -1), tokens], dim=1) + vit.pos_embed[:, : 1 + 3 * 16]
        after0 = vit.blocks[0](tokens)
        last = vit.blocks[1](after0)
        torch.testing.assert_close(fx_cls(x), last[:, 0], atol=1e-5, rtol=0)
        torch.testing.assert_close(fx_b0(x), after0[:, 1:].mean(dim=1), atol=1e-5, rtol=0)


# ----------------------------------------------------------------- bad input


def test_more_channels_than_max_in_chans(tiny, tmp_path):
    with pytest.raises(ScreenError, match=r"gives 12 channels but this checkpoint embeds at most 11 \(max_in_chans"):
        build_feature_extractor(model_entry(tiny["files"]["pickle"]), 12, tiny["files"]["pickle"])
    names = [f"c{i}" for i in range(12)]
    store = write_plate(tmp_path / "P12.zarr", np.zeros((2, 12, 32, 32), np.uint8), names)
    fx = build_feature_extractor(model_entry(tiny["files"]["pickle"]), 3, tiny["files"]["pickle"])
    from phenoica.embed import PlateModel, embed_plate

    with pytest.raises(ScreenError, match=r"P12.zarr: plate P1 gives 12 channels .* at most 11 .*models.op.channels"):
        embed_plate(
            store,
            metadata(2),
            PlateModel(fx, channels_key="models.op.channels"),
            tmp_path / "o.parquet",
            embed_options(crop_size=32, device="cpu"),
        )
    assert not (tmp_path / "o.parquet").exists()


def test_missing_channel_names_the_key_and_the_plate_channels(tiny, tmp_path):
    spec = model_entry(tiny["files"]["pickle"]) | {"channels": ["DNA", "Brightfield"]}
    with pytest.raises(
        ScreenError,
        match=r"channel\(s\) \['Brightfield'\] named by config key models.op.channels are "
        r"not in the plate's channels \['Mito', 'DNA', 'ER', 'AGP', 'RNA'\]",
    ):
        embed_model_plate(
            tiny["store"],
            metadata(6),
            tmp_path / "o.parquet",
            op_job(spec, tiny["files"]["pickle"]),
        )


def test_image_smaller_than_the_models_crop(tiny, tmp_path):
    store = write_plate(tmp_path / "P1.zarr", np.zeros((2, 5, 24, 24), np.uint8), STORE_CHANNELS)
    with pytest.raises(ScreenError, match=r"images are 24x24, smaller than the crop size 32 \(the model's img_size"):
        embed_model_plate(
            store,
            metadata(2),
            tmp_path / "o.parquet",
            op_job(model_entry(tiny["files"]["pickle"]), tiny["files"]["pickle"]),
        )


def test_layout_matching_nothing_lists_the_closest(tmp_path):
    # a convolutional network's keys: no supported layout
    torch.save(
        {
            "conv1.weight": torch.zeros(8, 3, 3, 3),
            "layer1.0.bn1.weight": torch.zeros(8),
            "fc.weight": torch.zeros(10, 8),
        },
        tmp_path / "resnet.pth",
    )
    with pytest.raises(CheckpointError) as err:
        build_feature_extractor(validate_config({})["models"]["mae"], 3, tmp_path / "resnet.pth")
    msg = str(err.value)
    assert "resnet.pth: checkpoint layout matches no supported architecture" in msg
    assert "Closest first:" in msg and "openphenom:" in msg and "phenoica:" in msg
    assert "unexpected ['conv1.weight', 'fc.weight', 'layer1.0.bn1.weight']" in msg


def test_openphenom_near_miss_names_what_differs(tiny, tmp_path):
    state = published_state(tiny["vit"])
    del state["encoder.vit_backbone.blocks.1.ls.gamma"]
    state["encoder.vit_backbone.blocks.1.ls.scale"] = torch.ones(48)
    torch.save({"state_dict": state}, tmp_path / "near.pth")
    with pytest.raises(CheckpointError) as err:
        build_feature_extractor(model_entry(tmp_path / "near.pth"), 5, tmp_path / "near.pth")
    msg = str(err.value)
    assert "near.pth: checkpoint does not fit the OpenPhenom layout" in msg
    assert "missing keys ['blocks.1.ls.gamma']" in msg and "unexpected keys ['blocks.1.ls.scale']" in msg
    assert "layout 'openphenom' detected from its keys" in msg


def test_explicit_openphenom_on_a_phenoica_checkpoint(tmp_path):
    from phenoica.models._vit import build_encoder, save_checkpoint

    spec = validate_config({})["models"]["mae"]
    path = save_checkpoint(build_encoder(spec, 3), spec, tmp_path / "mine.safetensors")
    with pytest.raises(CheckpointError) as err:
        build_feature_extractor(dict(spec, architecture="openphenom"), 3, path)
    msg = str(err.value)
    assert "patch_embed.proj.weight takes 3 channels; the OpenPhenom layout shares one single-channel projection" in msg
    assert "set by models.NAME.architecture" in msg and "Closest first: phenoica:" in msg


# ----------------------------------------------------------------- the published size


@pytest.mark.slow
def test_published_size_vit_s16_at_256px_on_a_512px_image(tmp_path):
    """ViT-S/16, 256 px, max_in_chans 11: a 512 px image is the mean of its four 256 px crops."""
    vit = reference_encoder(FULL, seed=3)
    files = save_all_ways(published_state(vit), tmp_path / "ckpt")
    channels = ["DNA", "ER", "RNA"]
    tiles = np.random.default_rng(1).integers(0, 256, (1, 3, 512, 512), dtype=np.uint8)
    store = write_plate(tmp_path / "P1.zarr", tiles, channels)
    want = reference_image_embeddings(vit, tiles, 256)
    for fmt in ("pickle", "safetensors"):
        spec = validate_config({"models": {"op": {"checkpoint": str(files[fmt])}}})["models"]["op"]
        out = tmp_path / f"{fmt}.parquet"
        embed_model_plate(
            store,
            metadata(1),
            out,
            op_job(spec, files[fmt], device="cpu", batch_size=4),
        )
        got = pd.read_parquet(out).filter(like="emb_").to_numpy()
        assert got.shape == (1, 384) and np.abs(got - want).max() < 1e-4, (fmt, np.abs(got - want).max())


# ----------------------------------------------------------------- through the workflow


@pytest.mark.slow
def test_workflow_embeds_with_an_openphenom_checkpoint(tmp_path):
    """The tiny demo screen (32 px, 5 channels) through the embed rule with a checkpoint of the
    layout (16 px crops: four per image), three channels chosen by name, per-channel embeddings."""
    import subprocess
    import sys

    import yaml

    from tests.conftest import REPO

    geo = dict(TINY, img_size=16, patch_size=8)
    vit = reference_encoder(geo)
    files = save_all_ways(published_state(vit), tmp_path / "ckpt")
    cfg = yaml.safe_load((REPO / "config" / "scenarios" / "demo.yaml").read_text())
    cfg["models"] = {
        "op": {
            "checkpoint": str(files["pickle_named_safetensors"]),
            "channels": ["mito", "nucleus", "er"],
            "per_channel": True,
        }
    }
    cfg["identifiability"] = {"align": False}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--configfile",
        str(tmp_path / "config.yaml"),
        "--cores",
        "2",
    ]
    dry = subprocess.run([*cmd, "-n", "--quiet", "rules"], capture_output=True, text=True, cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "train_mae" not in dry.stdout and "embed" in dry.stdout  # weights come from the checkpoint
    run = subprocess.run([*cmd, "results/embed/op/B01P01.parquet"], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    out = tmp_path / "results" / "embed" / "op" / "B01P01.parquet"
    df = pd.read_parquet(out)
    features = [c for c in df.columns if not c.startswith("Metadata_")]
    assert len(features) == 3 * 48 and features[0] == "emb_mito_0000" and features[-1] == "emb_er_0047"
    meta = embedding_metadata(out)
    assert meta["architecture"] == "openphenom" and meta["per_channel"] and meta["crop_size"] == 16
    assert meta["model_name"] == "op" and meta["channels"] == ["mito", "nucleus", "er"]
    log = (tmp_path / "results" / "logs" / "embed" / "op" / "B01P01.log").read_text()
    assert "ignoring 7 MAE decoder key(s)" in log and "despite its .safetensors name" in log
