"""Stock timm models from a local checkpoint: timm builds and loads them, heads are removed,
channels adapted (and logged), and bad names or files get clear errors. Uses timm's own tiny
registered ViT (``test_vit``, 160 px) with random weights: nothing is downloaded."""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd
import pytest
import timm
import torch
from safetensors.torch import save_file
from timm.models import adapt_input_conv

from phenoica.contract import ConfigError, validate_config, write_plate
from phenoica.embed import EmbedJob, embedding_metadata
from phenoica.embed._jobs import embed_model_plate
from phenoica.models import CheckpointError, build_feature_extractor
from tests.model_options import embed_options

NAME = "test_vit"


def random_timm(num_classes: int = 0, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = timm.create_model(NAME, pretrained=False, num_classes=num_classes).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def spec(checkpoint, **extra) -> dict:
    entry = {"timm_name": f"{NAME}.r160_in1k", "checkpoint": str(checkpoint), **extra}
    return validate_config({"models": {"t": entry}})["models"]["t"]


def patch_mean(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.forward_features(x)[:, model.num_prefix_tokens :].mean(dim=1)


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    folder = tmp_path_factory.mktemp("timm")
    model = random_timm()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(folder / "vit.safetensors"))
    return model, folder / "vit.safetensors"


def test_timm_model_from_a_local_safetensors_checkpoint(weights):
    model, path = weights
    fx = build_feature_extractor(spec(path), 3, path)
    assert fx.architecture == "timm" and fx.img_size == 160 and fx.in_chans == 3 and fx.normalize == "image"
    x = torch.randn(2, 3, 160, 160)
    with torch.no_grad():
        torch.testing.assert_close(fx(x), patch_mean(model, x), atol=1e-6, rtol=0)
    cls = build_feature_extractor(spec(path, pool="cls"), 3, path)
    with torch.no_grad():
        torch.testing.assert_close(cls(x), model.forward_features(x)[:, 0], atol=1e-6, rtol=0)


def test_classifier_head_is_loaded_then_removed(tmp_path, caplog):
    model = random_timm(num_classes=10, seed=1)
    path = tmp_path / "with_head.pth"
    torch.save({"state_dict": model.state_dict(), "epoch": 3}, path)
    with caplog.at_level(logging.INFO):
        fx = build_feature_extractor(spec(path), 3, path)
    assert "removed the checkpoint's 10-class head" in caplog.text
    x = torch.randn(1, 3, 160, 160)
    with torch.no_grad():
        torch.testing.assert_close(fx(x), patch_mean(model, x), atol=1e-6, rtol=0)


def test_channel_adaptation_is_timms_and_is_logged(weights, caplog):
    model, path = weights
    with caplog.at_level(logging.INFO):
        fx = build_feature_extractor(spec(path), 5, path)
    assert "channel adaptation: timm's test_vit.r160_in1k was trained on 3 channels, the screen gives 5" in caplog.text
    assert "scaled by 3/5" in caplog.text
    adapted = adapt_input_conv(5, model.patch_embed.proj.weight.detach())
    torch.testing.assert_close(fx.encoder.patch_embed.proj.weight, adapted)
    assert fx.in_chans == 5 and fx(torch.randn(1, 5, 160, 160)).shape == (1, 64)
    # known answer: with 6 channels (RGB twice, scaled by 3/6) a uniform input answers as the RGB model's
    six = build_feature_extractor(spec(path), 6, path)
    with torch.no_grad():
        got = six.encoder.patch_embed.proj(torch.ones(1, 6, 16, 16))
        want = model.patch_embed.proj(torch.ones(1, 3, 16, 16))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_embed_rule_with_a_timm_model_and_chosen_channels(weights, tmp_path):
    _, path = weights
    names = ["DNA", "ER", "RNA", "AGP", "Mito"]
    tiles = np.random.default_rng(0).integers(0, 256, (3, 5, 160, 160), dtype=np.uint8)
    store = write_plate(tmp_path / "P1.zarr", tiles, names)
    meta = pd.DataFrame(
        {
            "Metadata_Batch": "B1",
            "Metadata_Plate": "P1",
            "Metadata_Well": ["A01", "A02", "A03"],
            "Metadata_Site": 1,
            "Metadata_Gene": "NTC",
            "Metadata_Guide": "g",
            "Metadata_PertType": "control",
            "Metadata_ImageIndex": [0, 1, 2],
        }
    )
    out = tmp_path / "P1.parquet"
    embed_model_plate(
        store,
        meta,
        out,
        EmbedJob("t", path, embed_options(spec(path, channels=["Mito", "ER", "DNA"]), device="cpu"), threads=1),
    )
    df = pd.read_parquet(out)
    assert df.filter(like="emb_").shape == (3, 64)
    meta_ = embedding_metadata(out)
    assert meta_["architecture"] == "timm" and meta_["channels"] == ["Mito", "ER", "DNA"] and meta_["crop_size"] == 160


def test_bad_names_and_files(weights, tmp_path):
    _, path = weights
    from phenoica.workflow._model_checks import check_models

    misspelt = validate_config({"models": {"t": {"timm_name": "vit_bse_patch16_224", "checkpoint": "x.pth"}}})
    problems: list[str] = []
    check_models(misspelt["models"], None, {}, problems)  # the door names the key, before any model is built
    assert len(problems) == 1 and re.match(
        r"config key models.t.timm_name: timm .* knows no model 'vit_bse_patch16_224'; "
        r"closest names: \['vit_base_patch16_224'",
        problems[0],
    )
    with pytest.raises(ConfigError, match="needs checkpoint"):
        validate_config({"models": {"t": {"timm_name": NAME}}})
    with pytest.raises(CheckpointError, match="absent.safetensors: checkpoint not found"):
        build_feature_extractor(spec(tmp_path / "absent.safetensors"), 3, tmp_path / "absent.safetensors")
    mislabeled = tmp_path / "vit.safetensors"
    torch.save(random_timm().state_dict(), mislabeled)
    with pytest.raises(
        CheckpointError, match="is a torch checkpoint but its name says otherwise.*rename it to end in .pth"
    ):
        build_feature_extractor(spec(mislabeled), 3, mislabeled)
    other = tmp_path / "other.pth"
    torch.save(timm.create_model("test_vit2", pretrained=False, num_classes=0).state_dict(), other)
    with pytest.raises(CheckpointError, match=r"other.pth: does not load into timm's 'test_vit.r160_in1k'"):
        build_feature_extractor(spec(other), 3, other)
