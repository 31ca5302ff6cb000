"""Embedding options of phenoica's own encoders (block, pool, per-channel), the crop-wise
normalization of the OpenPhenom recipe, the keys MAE training depends on, the architecture
registry, the declared extractor interface with its plate/model fit check, and phenoica's own ViT
read from its spec (the door's check, no network built)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from phenoica.contract import ConfigError, validate_config
from phenoica.models import (
    DeclaredViT,
    FeatureExtractor,
    ModelInputs,
    build_feature_extractor,
    check_fit,
    create_model,
    declared_model,
    module_inputs,
    register_model,
    training_spec,
)
from phenoica.models._registry import list_models, model_entrypoint
from phenoica.models._vit import MAX_CHANNELS, build_encoder
from phenoica.screen import prepare, scale_intensity
from phenoica.screen._preprocess import normalize_crops

SPEC = dict(validate_config({})["models"]["mae"], img_size=16, patch_size=4, embed_dim=32, depth=3, num_heads=2)
CA_SPEC = dict(SPEC, channel_agnostic=True)
N = (16 // 4) ** 2


def manual_blocks(enc, x: torch.Tensor, upto: int) -> torch.Tensor:
    """Tokens after block ``upto`` (no final norm), by hand from timm's parts."""
    t = enc.norm_pre(enc.patch_drop(enc._pos_embed(enc.patch_embed(x))))
    for blk in enc.blocks[: upto + 1]:
        t = blk(t)
    return t


@pytest.mark.parametrize("spec", [SPEC, CA_SPEC], ids=["standard", "channel_agnostic"])
def test_block_option_takes_that_blocks_tokens(spec):
    enc = build_encoder(spec, 3, seed=4).eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        for block, index in ((0, 0), (1, 1), (-1, 2)):
            got = FeatureExtractor(enc, block=block).eval()(x)
            torch.testing.assert_close(got, manual_blocks(enc, x, index)[:, 1:].mean(dim=1), atol=1e-6, rtol=0)
        # the default is forward_features, which ends with the final norm: not the same as block -1
        assert not torch.allclose(FeatureExtractor(enc)(x), FeatureExtractor(enc, block=-1)(x), atol=1e-4)
        cls1 = FeatureExtractor(enc, pool="cls", block=1)(x)
        torch.testing.assert_close(cls1, manual_blocks(enc, x, 1)[:, 0], atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="block 3 is out of range for an encoder of 3 blocks"):
        FeatureExtractor(enc, block=3)
    assert FeatureExtractor(enc, block=-3).options()["block"] == 0


def test_per_channel_for_phenoicas_channel_agnostic_encoder():
    fx = build_feature_extractor(dict(CA_SPEC, per_channel=True), 4).eval()
    x = torch.randn(3, 4, 16, 16)
    with torch.no_grad():
        per = fx(x)
        tokens = fx.encoder.forward_features(x)[:, 1:]
    assert per.shape == (3, 4 * 32) and fx.feature_dim is None and fx.embed_dim == 32
    for c in range(4):
        torch.testing.assert_close(per[:, c * 32 : (c + 1) * 32], tokens[:, c * N : (c + 1) * N].mean(dim=1))
    pooled = build_feature_extractor(CA_SPEC, 4).eval()
    with torch.no_grad():
        torch.testing.assert_close(per.reshape(3, 4, 32).mean(dim=1), pooled(x), atol=1e-6, rtol=0)
    assert fx.feature_names(["a", "b", "c", "d"])[31:33] == ["emb_a_0031", "emb_b_0000"]
    assert pooled.feature_names(["a"])[:2] == ["emb_0000", "emb_0001"]


def test_per_channel_needs_a_shared_projection_and_mean_pooling():
    with pytest.raises(ValueError, match="per_channel needs an encoder with one patch projection shared"):
        FeatureExtractor(build_encoder(SPEC, 3), per_channel=True)
    with pytest.raises(ValueError, match="needs pool 'mean'"):
        FeatureExtractor(build_encoder(CA_SPEC, 3), pool="cls", per_channel=True)
    with pytest.raises(ConfigError, match="models.m.per_channel needs channel_agnostic: true"):
        validate_config({"models": {"m": {"per_channel": True}}})


def test_crop_normalization_is_torchs_instance_norm_per_crop():
    tiles = np.random.default_rng(0).integers(0, 256, (2, 3, 40, 40), dtype=np.uint8)
    crops = prepare(tiles, 16, normalize="crop")
    assert crops.shape == (2, 4, 3, 16, 16)
    x = torch.from_numpy(tiles).float() / 255.0
    norm = nn.InstanceNorm2d(3, affine=False, track_running_stats=False)
    # crop (row 1, column 0) of image 1, centred: 40 = 2 x 16 + 4 + 4
    torch.testing.assert_close(crops[1, 2], norm(x[1:2, :, 20:36, 4:20])[0], atol=1e-6, rtol=0)
    means = crops.mean(dim=(-2, -1))
    assert float(means.abs().max()) < 1e-5 and float((crops.var(dim=(-2, -1), unbiased=False) - 1).abs().max()) < 1e-3
    # differs from normalizing the whole image first
    assert not torch.allclose(crops, prepare(tiles, 16), atol=1e-3)
    torch.testing.assert_close(normalize_crops(crops), crops, atol=1e-5, rtol=1e-4)  # idempotent up to eps


def test_tensor_tiles_prepare_exactly_like_arrays():
    tiles = np.random.default_rng(1).integers(0, 65536, (3, 2, 24, 24), dtype=np.uint16)
    for normalize in ("image", "crop"):
        from_array = prepare(tiles, 8, normalize=normalize)
        from_tensor = prepare(torch.from_numpy(tiles.astype(np.int32)), 8, intensity_max=65535.0, normalize=normalize)
        assert torch.equal(from_array, from_tensor)
    assert torch.equal(
        scale_intensity(torch.from_numpy(tiles[:, :1].astype(np.uint8))), scale_intensity(tiles[:, :1].astype(np.uint8))
    )
    with pytest.raises(ValueError, match="normalize must be one of"):
        prepare(tiles, 8, normalize="batch")


def test_training_depends_on_training_keys_only():
    cfg = validate_config({})["models"]["mae"]
    changed = dict(cfg, pool="cls", block=2, per_channel=False, checkpoint=None)
    assert training_spec(changed) == training_spec(cfg)
    assert training_spec(dict(cfg, embed_dim=64)) != training_spec(cfg)
    assert training_spec(dict(cfg, channels=["a", "b"])) != training_spec(cfg)  # trained on those channels
    assert set(training_spec(cfg)) >= {"img_size", "patch_size", "decoder_depth", "in_chans", "channel_agnostic"}


def test_architectures_are_registered_by_name():
    assert list_models() == ["openphenom", "phenoica", "timm"]
    encoder, normalize = create_model("phenoica", SPEC, 3)
    assert normalize == "image" and isinstance(encoder, nn.Module)
    with pytest.raises(ConfigError, match="architecture must be one of openphenom, phenoica, timm; got 'resnet'"):
        model_entrypoint("resnet")
    with pytest.raises(ValueError, match="architecture 'timm' is registered twice"):
        register_model("timm")(create_model)


def test_the_declared_interface_and_the_fit_check():
    fixed, agnostic = build_feature_extractor(SPEC, 3), build_feature_extractor(CA_SPEC, 4)
    assert module_inputs(fixed).in_chans == 3 and module_inputs(fixed).extractor is fixed
    shared = module_inputs(agnostic)
    assert shared.in_chans is None and shared.max_in_chans == agnostic.max_in_chans and shared.feature_dim == 32
    assert module_inputs(build_encoder(SPEC, 3)).in_chans == 3  # a bare timm ViT, described from timm's attributes
    assert check_fit(shared, (16, 16), 16, ["a", "b"]) is None
    small = check_fit(shared, (8, 16), 16, ["a", "b"])
    assert small is not None and small.kind == "crop"
    assert small.plate_message("P1.zarr: plate P1", "k").startswith(
        "P1.zarr: plate P1 images are 8x16, smaller than the crop size 16"
    )
    assert small.screen_message("m") == (
        "8x16 images, 2 channel(s) ['a', 'b']: smaller than model m's crop size 16 (the model's img_size, or embed.crop_size)"
    )
    count = check_fit(module_inputs(fixed), (16, 16), 16, ["a", "b"])
    assert count is not None and count.plate_message("P", "k") == "P has 2 channels but the model expects 3"
    most = check_fit(ModelInputs(None, max_in_chans=1), (16, 16), 16, ["a", "b"])
    assert (
        most is not None
        and "embeds at most 1 channels; choose up to 1 with models.m.channels" in most.screen_message("m")
    )


def _outcome(call):
    """What a call gives, or its error's type and message."""
    try:
        return call()
    except ValueError as exc:  # ScreenError, ConfigError, a spec the builder rejects
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize(
    "change,n_chans",
    [
        ({}, 3),
        ({"channel_agnostic": True}, 4),
        ({"channel_agnostic": True, "per_channel": True}, 5),
        ({"channel_agnostic": True}, MAX_CHANNELS + 1),
        ({"block": -1, "pool": "cls"}, 2),
        ({"block": 3}, 3),
        ({"in_chans": 3}, 4),
        ({"per_channel": True}, 3),
        ({"embed_dim": 30}, 3),
        ({"img_size": 12, "patch_size": 4}, 1),
    ],
)
def test_a_declared_model_says_what_building_it_says(change, n_chans):
    """The door reads phenoica's own ViT from its spec (no torch): the same inputs, crop side,
    features per crop, shape findings and errors as the built extractor, for fitting and
    misfitting crops."""
    spec = dict(SPEC, **change)
    declared, built = (
        _outcome(lambda: declared_model(spec, n_chans)),
        _outcome(lambda: build_feature_extractor(spec, n_chans)),
    )
    if isinstance(built, tuple):
        assert declared == built
        return
    assert isinstance(declared, DeclaredViT) and declared.img_size == built.img_size
    got, want = declared.inputs, module_inputs(built)
    assert (got.in_chans, got.max_in_chans, got.feature_dim) == (want.in_chans, want.max_in_chans, want.feature_dim)
    side = built.img_size
    for shape in [
        (1, n_chans, side, side),
        (1, n_chans, side // 2, side // 2),
        (1, n_chans + 1, side, side),
        (n_chans, side),
    ]:
        assert _outcome(lambda: declared.check(shape)) == _outcome(
            lambda: built.check(torch.empty(shape, device="meta"))
        )
    assert declared.output_dim(n_chans) == built.output_dim(n_chans)
    with torch.no_grad():
        assert built(torch.zeros(1, n_chans, side, side)).shape[1] == declared.output_dim(n_chans)


def test_a_model_read_from_a_checkpoint_or_timm_is_not_declared():
    assert declared_model(dict(SPEC, checkpoint="m.safetensors"), 3) is None
    assert declared_model(dict(SPEC, timm_name="vit_small_patch16_224"), 3) is None
    assert declared_model(dict(SPEC, architecture="openphenom"), 3) is None
    assert declared_model(dict(SPEC, architecture="phenoica"), 3) is not None
