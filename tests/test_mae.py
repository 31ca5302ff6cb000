"""Tests of phenoica.models._mae: timm ViT encoder, channel-agnostic embedding, MAE, checkpoints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from skimage import data
from timm.models.vision_transformer import VisionTransformer

from phenoica.contract import ScreenError, write_plate
from phenoica.models import CheckpointError, FeatureExtractor, build_feature_extractor, train_mae
from phenoica.models import _crops as crops_module
from phenoica.models._checkpoint import checkpoint_metadata
from phenoica.models._crops import CropSampler
from phenoica.models._layers import SharedChannelPatchEmbed
from phenoica.models._mae import (
    build_mae,
    patchify,
    random_crops,
    random_masking,
    reconstruction_loss,
    sample_training_images,
    warmup_cosine,
)
from phenoica.models._vit import MAX_CHANNELS, ChannelAgnosticPatchEmbed, build_encoder, load_encoder, save_checkpoint
from phenoica.screen import scale_intensity
from phenoica.screen._preprocess import normalize_per_channel
from tests.model_options import model_entry, train_options

torch.set_num_threads(1)

SPEC = model_entry(
    checkpoint=None,
    seed=0,
    img_size=16,
    patch_size=4,
    embed_dim=32,
    depth=2,
    num_heads=2,
    mlp_ratio=2.0,
    channel_agnostic=False,
    in_chans=None,
    decoder_embed_dim=32,
    decoder_depth=1,
    decoder_num_heads=2,
    pool="mean",
)
CA_SPEC = dict(SPEC, channel_agnostic=True)
N_PATCHES = (16 // 4) ** 2
TRAIN = dict(
    steps=4,
    batch_size=8,
    lr=3e-3,
    weight_decay=0.05,
    warmup_steps=2,
    mask_ratio=0.75,
    norm_pix_loss=True,
    max_images=4096,
    log_every=2,
)


def cell_tiles(n: int, size: int = 32, channels: int = 3, seed: int = 0) -> np.ndarray:
    """uint8 tiles (n, C, size, size): crops of scikit-image's real microscopy image."""
    cell = data.cell().astype(np.float32)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        t, l = rng.integers(0, cell.shape[0] - size), rng.integers(0, cell.shape[1] - size)
        c = cell[t : t + size, l : l + size]
        chans = [c, c.T, 255 - c, c[::-1], c[:, ::-1]][:channels]
        out.append(np.stack(chans))
    return np.clip(np.stack(out), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def plate(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plates") / "P1.zarr"
    return write_plate(path, cell_tiles(32), ["dna", "er", "actin"], chunk_images=8)


def features(model: FeatureExtractor, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(x)


# ------------------------------------------------------------------ encoder


def test_encoder_is_timm_vit_with_expected_token_count():
    enc = build_encoder(SPEC, 3)
    assert isinstance(enc, VisionTransformer)
    assert enc.num_classes == 0 and enc.embed_dim == 32 and len(enc.blocks) == 2
    tokens = enc.forward_features(torch.randn(2, 3, 16, 16))
    assert tokens.shape == (2, N_PATCHES + 1, 32)
    assert "blocks.0.attn.qkv.weight" in enc.state_dict()


def test_channel_agnostic_serves_any_channel_count_with_same_weights():
    enc = build_encoder(CA_SPEC, 3)
    assert isinstance(enc, VisionTransformer)
    assert enc.patch_embed.proj.weight.shape[1] == 1  # one projection shared by all channels
    assert enc.forward_features(torch.randn(2, 3, 16, 16)).shape == (2, 3 * N_PATCHES + 1, 32)
    assert enc.forward_features(torch.randn(2, 5, 16, 16)).shape == (2, 5 * N_PATCHES + 1, 32)
    fx = FeatureExtractor(enc).eval()
    x5 = torch.randn(2, 5, 16, 16)
    assert features(fx, x5).shape == (2, 32)
    # Channel identity is embedded: swapping two channels changes the features.
    assert not torch.allclose(features(fx, x5), features(fx, x5[:, [1, 0, 2, 3, 4]]), atol=1e-5)
    with pytest.raises(ScreenError, match=f"at most {MAX_CHANNELS}"):
        fx(torch.randn(1, MAX_CHANNELS + 1, 16, 16))


def test_channel_agnostic_patch_embed_keys_and_positions():
    enc = build_encoder(CA_SPEC, 3)
    pe = enc.patch_embed
    assert isinstance(pe, SharedChannelPatchEmbed)  # the shared projection, plus positions
    assert list(pe.state_dict()) == ["channel_embed", "proj.weight", "proj.bias"]
    assert [k for k in enc.state_dict() if k.startswith("patch_embed.")] == [
        "patch_embed.channel_embed",
        "patch_embed.proj.weight",
        "patch_embed.proj.bias",
    ]
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        tokens = SharedChannelPatchEmbed.forward(pe, x)
        want = tokens + (pe.spatial_embed.repeat(3, 1) + pe.channel_embed[:3].repeat_interleave(N_PATCHES, dim=0))
        assert torch.equal(pe(x), want)
    with pytest.raises(ValueError, match="channel-agnostic encoder supports 1..16 channels, got 17"):
        ChannelAgnosticPatchEmbed(img_size=16, patch_size=4, in_chans=17, embed_dim=32)


def test_build_encoder_is_seeded_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = build_encoder(SPEC, 3, seed=7)
    after = torch.rand(1)
    b, c = build_encoder(SPEC, 3, seed=7), build_encoder(SPEC, 3, seed=8)
    assert torch.equal(before, after)
    assert all(torch.equal(v, b.state_dict()[k]) for k, v in a.state_dict().items())
    assert not torch.equal(a.blocks[0].attn.qkv.weight, c.blocks[0].attn.qkv.weight)


def test_wrong_channel_count_raises():
    with pytest.raises(ScreenError, match="in_chans=3 .* screen has 5"):
        build_encoder(dict(SPEC, in_chans=3), 5)
    assert build_encoder(dict(CA_SPEC, in_chans=3), 5).in_chans == 5  # agnostic: fine
    fx = FeatureExtractor(build_encoder(SPEC, 3))
    with pytest.raises(ScreenError, match="4 channels, but the encoder was built for 3"):
        fx(torch.randn(1, 4, 16, 16))
    with pytest.raises(ScreenError, match="crops are 32x32"):
        fx(torch.randn(1, 3, 32, 32))


def test_mean_and_cls_pooling():
    enc = build_encoder(SPEC, 3).eval()
    x = torch.randn(4, 3, 16, 16)
    mean, cls = FeatureExtractor(enc, "mean"), FeatureExtractor(enc, "cls")
    fm, fc = features(mean, x), features(cls, x)
    assert fm.shape == fc.shape == (4, 32) and mean.feature_dim == 32 and mean.in_chans == 3
    assert FeatureExtractor(build_encoder(CA_SPEC, 3)).in_chans is None  # any channel count
    assert fm.dtype == torch.float32
    with torch.no_grad():
        tokens = enc.forward_features(x)
    torch.testing.assert_close(fm, tokens[:, 1:].mean(dim=1))
    torch.testing.assert_close(fc, tokens[:, 0])
    assert not torch.allclose(fm, fc)
    with pytest.raises(ValueError, match="pool"):
        FeatureExtractor(enc, "max")


# ------------------------------------------------------------------ masking and loss


def test_patchify_known_layout():
    imgs = torch.arange(2 * 3 * 16 * 16, dtype=torch.float32).reshape(2, 3, 16, 16)
    std = patchify(imgs, 4, channel_agnostic=False)
    assert std.shape == (2, 16, 4 * 4 * 3)
    # token 6 = patch row 1, column 2; pixels in (row, col, channel) order
    expected = imgs[1, :, 4:8, 8:12].permute(1, 2, 0).reshape(-1)
    assert torch.equal(std[1, 6], expected)
    ca = patchify(imgs, 4, channel_agnostic=True)
    assert ca.shape == (2, 3 * 16, 16)
    assert torch.equal(ca[1, 2 * 16 + 6], imgs[1, 2, 4:8, 8:12].reshape(-1))


def test_random_masking_keeps_exact_count_and_the_right_tokens():
    tokens = torch.randn(5, 16, 8)
    g = torch.Generator().manual_seed(0)
    visible, mask, ids_restore = random_masking(tokens, 0.75, g)
    keep = round((1 - 0.75) * 16)
    assert visible.shape == (5, keep, 8)
    assert torch.equal(mask.sum(dim=1), torch.full((5,), 16.0 - keep))
    for b in range(5):
        kept = tokens[b][mask[b] == 0]
        assert {tuple(r.tolist()) for r in kept} == {tuple(r.tolist()) for r in visible[b]}
    # different samples get different masks; the same seed gives the same masks
    assert not all(torch.equal(mask[0], mask[b]) for b in range(1, 5))
    _, mask2, _ = random_masking(tokens, 0.75, torch.Generator().manual_seed(0))
    assert torch.equal(mask, mask2)


def test_loss_counts_only_masked_patches():
    torch.manual_seed(0)
    mae = build_mae(SPEC, 3).eval()
    imgs = torch.randn(3, 3, 16, 16)
    with torch.no_grad():
        loss, pred, mask = mae(imgs, 0.75, torch.Generator().manual_seed(1))
    target = patchify(imgs, 4, channel_agnostic=False)
    torch.testing.assert_close(reconstruction_loss(target, pred, mask), loss)
    altered = target.clone()
    altered[mask == 0] = torch.randn_like(altered[mask == 0]) * 10
    torch.testing.assert_close(reconstruction_loss(altered, pred, mask), loss)
    altered = target.clone()
    altered[mask == 1] += 5.0 * torch.randn_like(altered[mask == 1])
    assert abs(float(reconstruction_loss(altered, pred, mask)) - float(loss)) > 1e-3
    # known value: raw MSE of masked tokens only
    t, p = torch.zeros(1, 4, 2), torch.ones(1, 4, 2)
    p[0, 0] = 3.0  # token 0 is visible: its error (9) must not count
    m = torch.tensor([[0.0, 1.0, 1.0, 1.0]])
    assert float(reconstruction_loss(t, p, m, norm_pix_loss=False)) == pytest.approx(1.0)


def test_channel_agnostic_mae_runs_on_any_channel_count():
    mae = build_mae(CA_SPEC, 3)
    for c in (3, 5):
        loss, pred, mask = mae(torch.randn(2, c, 16, 16), 0.75, torch.Generator().manual_seed(0))
        assert pred.shape == (2, c * N_PATCHES, 16)
        n_masked = c * N_PATCHES - round(0.25 * c * N_PATCHES)
        assert torch.equal(mask.sum(1), torch.full((2,), float(n_masked)))
        loss.backward()
        assert torch.isfinite(loss)


def test_warmup_cosine_schedule():
    assert warmup_cosine(0, 4, 20) == pytest.approx(0.25)
    assert warmup_cosine(3, 4, 20) == pytest.approx(1.0)
    assert warmup_cosine(12, 4, 20) == pytest.approx(0.5)
    assert warmup_cosine(20, 4, 20) == pytest.approx(0.0)
    assert warmup_cosine(0, 0, 10) == pytest.approx(1.0)


# ------------------------------------------------------------------ training data and training


def test_sample_training_images_is_seeded_and_capped(tmp_path, plate):
    other = write_plate(tmp_path / "P2.zarr", cell_tiles(10, seed=1), ["dna", "er", "actin"])
    a = sample_training_images([plate, other], 20, seed=3)
    b = sample_training_images([plate, other], 20, seed=3)
    c = sample_training_images([plate, other], 20, seed=4)
    assert sum(len(x) for x in a) == 20
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(len(x) == len(y) and np.array_equal(x, y) for x, y in zip(a, c))
    assert sum(len(x) for x in sample_training_images([plate, other], 1000, seed=0)) == 42
    four = write_plate(tmp_path / "P4.zarr", cell_tiles(4, channels=4), ["a", "b", "c", "d"])
    with pytest.raises(ScreenError, match="differ in channel count"):
        sample_training_images([plate, four], 10, seed=0)


def test_random_crops_are_normalized_crops_of_the_images():
    tiles = cell_tiles(6, size=32)
    crops = random_crops([tiles], 10, 16, torch.Generator().manual_seed(0))
    assert crops.shape == (10, 3, 16, 16) and crops.dtype == torch.float32
    assert float(crops.std()) == pytest.approx(1.0, abs=0.35)
    again = random_crops([tiles], 10, 16, torch.Generator().manual_seed(0))
    assert torch.equal(crops, again)
    with pytest.raises(ScreenError, match="smaller than the model's img_size 64"):
        random_crops([tiles], 2, 64, torch.Generator().manual_seed(0))


def whole_image_crops(images: list[np.ndarray], batch_size: int, crop: int, generator: torch.Generator) -> torch.Tensor:
    """The training batch by its definition: every chosen image scaled and normalized whole, then
    one random crop of it cut (the images and offsets drawn as CropSampler draws them)."""
    sizes = torch.tensor([len(a) for a in images])
    owner = torch.repeat_interleave(torch.arange(len(images)), sizes)
    pick = torch.randint(0, int(sizes.sum()), (batch_size,), generator=generator)
    offsets = torch.cumsum(sizes, 0) - sizes
    out = []
    for p in torch.unique(owner[pick]).tolist():
        rows = (pick[owner[pick] == p] - offsets[p]).numpy()
        imgs = normalize_per_channel(scale_intensity(images[p][rows]))
        h, w = imgs.shape[-2:]
        tops = torch.randint(0, h - crop + 1, (len(rows),), generator=generator).tolist()
        lefts = torch.randint(0, w - crop + 1, (len(rows),), generator=generator).tolist()
        out.extend(img[:, t : t + crop, l : l + crop] for img, t, l in zip(imgs, tops, lefts))
    return torch.stack(out)


@pytest.mark.parametrize("threads", [1, 2])
def test_crop_sampler_is_whole_image_normalization_bit_for_bit(monkeypatch, threads):
    # Statistics computed once per image, a few images at a time, must give the very numbers of
    # normalizing each chosen image whole at every step: the checkpoint's bytes depend on them.
    monkeypatch.setattr(crops_module, "STATS_CHUNK_BYTES", 3 * 3 * 40 * 40 * 4)
    images = [
        cell_tiles(7, size=40),
        cell_tiles(5, size=32, seed=1),
        cell_tiles(4, size=24, seed=2).astype(np.uint16) * 200,
    ]
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        sampler = CropSampler(images, 16)
        fast, slow = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        for _ in range(20):
            batch = sampler.batch(9, fast)
            assert batch.shape == (9, 3, 16, 16) and batch.dtype == torch.float32 and batch.is_contiguous()
            assert torch.equal(batch, whole_image_crops(images, 9, 16, slow))
        assert torch.equal(fast.get_state(), slow.get_state())  # the same draws, in the same order
    finally:
        torch.set_num_threads(before)


def test_training_lowers_the_loss(tmp_path, plate):
    train = dict(TRAIN, steps=150, batch_size=32, warmup_steps=5, norm_pix_loss=True, log_every=10)
    seen = []
    summary = train_mae(
        [plate],
        train_options(SPEC, seed=0, **train),
        out=tmp_path / "m.safetensors",
        on_step=lambda step, loss: seen.append(loss),
    )
    assert len(seen) == 150 and summary["steps"] == 150
    assert summary["final_loss"] < 0.7 * summary["initial_loss"]
    # Targets are per-patch standardized, so predicting 0 everywhere scores exactly 1.0: a model
    # that has learned nothing about the images cannot beat it.
    assert summary["final_loss"] < 0.9
    assert summary["images_per_s"] > 0 and (tmp_path / "m.safetensors").exists()


def test_training_is_deterministic(tmp_path, plate):
    runs = [
        train_mae([plate], train_options(CA_SPEC, seed=s, **TRAIN), out=tmp_path / f"m{i}.safetensors")
        for i, s in enumerate((5, 5, 6))
    ]
    a, b, c = (load_file(str(tmp_path / f"m{i}.safetensors")) for i in range(3))
    assert runs[0]["final_loss"] == runs[1]["final_loss"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["blocks.0.attn.qkv.weight"], c["blocks.0.attn.qkv.weight"])


# ------------------------------------------------------------------ checkpoints


@pytest.mark.parametrize("spec", [SPEC, CA_SPEC], ids=["standard", "channel_agnostic"])
def test_save_load_round_trip_gives_identical_features(tmp_path, spec):
    mae = build_mae(spec, 3, seed=11)
    with torch.no_grad():  # move weights away from init so the test sees real loading
        for p in mae.parameters():
            p.add_(0.01 * torch.randn_like(p))
    path = save_checkpoint(mae, spec, tmp_path / "mae.safetensors")
    stored = load_file(str(path))
    assert "blocks.0.attn.qkv.weight" in stored and any(k.startswith("decoder.") for k in stored)
    meta = checkpoint_metadata(path)
    assert meta["spec"]["embed_dim"] == 32 and meta["in_chans"] == 3
    x = torch.randn(3, 3, 16, 16)
    original = features(FeatureExtractor(mae.encoder).eval(), x)
    loaded = build_feature_extractor(spec, 3, path)
    assert torch.equal(features(loaded, x), original)


def test_load_timm_state_dict_saved_with_torch(tmp_path):
    # A plain timm ViT (with a classifier head and learned pos_embed), not built by phenoica.
    torch.manual_seed(3)
    timm_vit = VisionTransformer(
        img_size=16, patch_size=4, in_chans=3, num_classes=10, embed_dim=32, depth=2, num_heads=2, mlp_ratio=2.0
    ).eval()
    path = tmp_path / "timm.pth"
    torch.save({"model": {f"module.{k}": v for k, v in timm_vit.state_dict().items()}, "epoch": 3}, path)
    enc = load_encoder(path, SPEC, 3).eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        want = timm_vit.forward_features(x)[:, 1:].mean(dim=1)
    torch.testing.assert_close(features(FeatureExtractor(enc), x), want)
    # a bare state dict under encoder. prefixes loads too
    torch.save({f"encoder.{k}": v for k, v in enc.state_dict().items()}, tmp_path / "bare.pt")
    assert torch.equal(load_encoder(tmp_path / "bare.pt", SPEC, 3).pos_embed, enc.pos_embed)


def test_bad_checkpoints_raise_naming_key_and_file(tmp_path):
    state = build_encoder(SPEC, 3).state_dict()
    renamed = dict(state)
    renamed["blocks.0.attn.qkv.weight_renamed"] = renamed.pop("blocks.0.attn.qkv.weight")
    torch.save(renamed, tmp_path / "renamed.pth")
    with pytest.raises(CheckpointError) as err:
        load_encoder(tmp_path / "renamed.pth", SPEC, 3)
    msg = str(err.value)
    assert "renamed.pth" in msg and "missing keys ['blocks.0.attn.qkv.weight']" in msg
    assert "unexpected keys ['blocks.0.attn.qkv.weight_renamed']" in msg

    torch.save(build_encoder(dict(SPEC, mlp_ratio=4.0), 3).state_dict(), tmp_path / "wide.pth")
    with pytest.raises(CheckpointError, match=r"wide\.pth.*shape mismatches.*blocks\.0\.mlp\.fc1\.weight"):
        load_encoder(tmp_path / "wide.pth", SPEC, 3)

    save_checkpoint(build_encoder(SPEC, 3), SPEC, tmp_path / "three.safetensors")
    with pytest.raises(CheckpointError, match=r"three\.safetensors.*trained on 3-channel images.*screen has 5"):
        load_encoder(tmp_path / "three.safetensors", SPEC, 5)
    with pytest.raises(CheckpointError, match="channel_agnostic"):
        load_encoder(tmp_path / "three.safetensors", CA_SPEC, 3)
    with pytest.raises(CheckpointError, match=r"architecture differs.*embed_dim: checkpoint 32 vs spec 64"):
        load_encoder(tmp_path / "three.safetensors", dict(SPEC, embed_dim=64), 3)

    torch.save({"optimizer": {"lr": 0.1}}, tmp_path / "notweights.pth")
    with pytest.raises(CheckpointError, match="notweights.pth: not a state dict"):
        load_encoder(tmp_path / "notweights.pth", SPEC, 3)
    with pytest.raises(CheckpointError, match="checkpoint not found"):
        load_encoder(tmp_path / "absent.safetensors", SPEC, 3)


def test_channel_agnostic_checkpoint_loads_for_other_channel_counts(tmp_path):
    path = save_checkpoint(build_encoder(CA_SPEC, 3, seed=2), CA_SPEC, tmp_path / "ca.safetensors")
    fx3, fx5 = build_feature_extractor(CA_SPEC, 3, path), build_feature_extractor(CA_SPEC, 5, path)
    x = torch.randn(2, 5, 16, 16)
    assert torch.equal(features(fx3, x), features(fx5, x))
    assert features(fx3, x[:, :3]).shape == (2, 32)


def test_checkpoint_format_comes_from_the_bytes(tmp_path):
    from phenoica.models._checkpoint import file_format, read_checkpoint

    enc = build_encoder(SPEC, 3, seed=5)
    save_checkpoint(enc, SPEC, tmp_path / "a.safetensors")
    (tmp_path / "a.safetensors").rename(tmp_path / "a.bin")  # safetensors bytes under a torch name
    torch.save({"model": enc.state_dict()}, tmp_path / "b.safetensors")  # a pickle under a safetensors name
    assert file_format(tmp_path / "a.bin") == "safetensors" and file_format(tmp_path / "b.safetensors") == "torch"
    a, b = read_checkpoint(tmp_path / "a.bin"), read_checkpoint(tmp_path / "b.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    x = torch.randn(2, 3, 16, 16)
    assert torch.equal(
        features(build_feature_extractor(SPEC, 3, tmp_path / "b.safetensors"), x),
        features(FeatureExtractor(enc).eval(), x),
    )
    (tmp_path / "c.pth").write_text("not weights")
    with pytest.raises(CheckpointError, match="c.pth: neither a safetensors file nor a torch checkpoint"):
        load_encoder(tmp_path / "c.pth", SPEC, 3)


def test_training_images_keep_the_models_channels_in_its_order(tmp_path, plate):
    full = sample_training_images([plate], 10, seed=2)
    chosen = sample_training_images([plate], 10, seed=2, channels=["actin", "dna"])
    assert all(np.array_equal(c, f[:, [2, 0]]) for c, f in zip(chosen, full))
    with pytest.raises(ScreenError, match=r"\['rna'\] named by config key models.m.channels"):
        sample_training_images([plate], 10, seed=2, channels=["rna"], channels_key="models.m.channels")
    # stores of different channel counts train one model when the chosen channels exist in both
    four = write_plate(tmp_path / "P4.zarr", cell_tiles(4, channels=4), ["actin", "x", "dna", "y"])
    both = sample_training_images([plate, four], 40, seed=0, channels=["dna", "actin"])
    assert {a.shape[1] for a in both} == {2}


def test_training_reruns_for_what_it_depends_on_only():
    """The train_mae params (the options' repr) leave out how a model embeds (pool, block) and the
    log interval, and hold the entry's shape and seed; the training seed adds the entry's seed to
    the workflow's."""
    base = train_options(SPEC, **TRAIN)
    assert repr(base) == repr(train_options(dict(SPEC, pool="cls", block=-1), **TRAIN))
    assert repr(base) == repr(train_options(SPEC, **dict(TRAIN, log_every=5)))
    assert repr(base) != repr(train_options(dict(SPEC, seed=1), **TRAIN))
    assert repr(base) != repr(train_options(dict(SPEC, embed_dim=64), **TRAIN))
    assert base.training_seed == 0 and train_options(dict(SPEC, seed=2), seed=3, **TRAIN).training_seed == 5
