"""The demo screen generator: layout, ground truth, factor statistics, rendering, batch effects."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats
from skimage import feature, measure

from phenoica.contract import _screen_data as screen
from phenoica.contract import validate_config
from phenoica.identifiability import _metrics as metrics
from phenoica.screen import DemoOptions
from phenoica.screen import _preprocess as preprocess
from phenoica.screen.demo import _cells as sim_cells
from phenoica.screen.demo import _design as sim_design
from phenoica.screen.demo import _layout as sim_layout
from phenoica.screen.demo import _nuisance as sim_nuisance
from phenoica.screen.demo import _plates as sim_plates
from phenoica.utils import derive_seed, rng_for, rng_from_sequence

SEED = 7


def tiny_demo(**overrides) -> DemoOptions:
    """2 batches x 1 plate, 3 genes (1 null) x 2 guides, 32x32 images: fast to render."""
    demo = {
        "n_batches": 2,
        "plates_per_batch": 1,
        "n_genes": 3,
        "n_null_genes": 1,
        "guides_per_gene": 2,
        "control_wells_per_plate": 8,
        "wells_per_guide_per_plate": 1,
        "sites_per_well": 2,
        "image_size": 32,
        "cells_per_image": 4,
        "chunk_images": 8,
    }
    demo.update(overrides)
    return DemoOptions.from_config(validate_config({"demo": demo, "seed": SEED}))


@pytest.fixture(scope="module")
def demo() -> DemoOptions:
    return tiny_demo()


@pytest.fixture(scope="module")
def plates(demo) -> dict[str, tuple[np.ndarray, pd.DataFrame, pd.DataFrame]]:
    return {plate: sim_plates.simulate_plate(demo, plate) for _, plate in demo.plates()}


# ------------------------------------------------------------------ truth and layout


def test_gene_truth_rows_and_effects(demo):
    truth = sim_design.gene_truth(demo)
    pert = truth[truth[screen.PERT_TYPE] == screen.PERTURBATION]
    ctrl = truth[truth[screen.PERT_TYPE] == screen.CONTROL]
    assert len(pert) == 3 * 2 and pert[screen.GUIDE].is_unique
    first = pert[screen.GENE].iloc[0]
    assert list(pert[screen.GUIDE][:2]) == [f"{first}_g1", f"{first}_g2"]
    assert len(ctrl) == sim_design.MAX_CONTROL_GUIDES and set(ctrl[screen.GENE]) == {sim_design.CONTROL_GENE}
    assert pert.groupby(screen.GENE)["has_effect"].first().sum() == 3 - 1
    lo, hi = demo.guide_efficacy
    assert pert["efficacy"].between(lo, hi).all() and (ctrl["efficacy"] == 0).all()
    assert pert["efficacy"].nunique() == len(pert)  # guides of a gene differ in efficacy
    for _, row in pert.iterrows():
        items = [s for s in row["affected_factors"].split(",") if s]
        assert len(items) == (demo.factors_per_gene if row["has_effect"] else 0)
    assert not ctrl["has_effect"].any() and (ctrl["affected_factors"] == "").all()
    assert not sim_design.gene_truth(demo._replace(seed=SEED + 1)).equals(truth)


def test_complexes_share_factors_and_take_real_corum_symbols():
    from phenoica.screen._annotations import corum_complexes

    demo = tiny_demo(n_genes=12, n_null_genes=3, n_complexes=2, genes_per_complex=3)
    truth = sim_design.gene_truth(demo)
    genes = truth[truth[screen.PERT_TYPE] == screen.PERTURBATION].drop_duplicates(screen.GENE)
    real = corum_complexes()
    owner = {g: c for c, members in real.items() for g in members}
    assert set(genes[screen.GENE]) <= set(owner)  # every symbol is a member of a listed real complex
    named = genes[genes["complex"] != ""]
    assert named["complex"].value_counts().tolist() == [3, 3] and named["has_effect"].all()
    for complex_name, members in named.groupby("complex"):
        assert members["affected_factors"].nunique() == 1  # members shift the same factors, the same way
        assert all(owner[g] == complex_name for g in members[screen.GENE])
    free = genes[genes["complex"] == ""]
    assert len(free) == 6 and free["has_effect"].sum() == 3  # complex-free remainder: 3 with an effect, 3 null
    assert len({owner[g] for g in free[screen.GENE]}) == 6  # no two of them from one real complex
    # guides of one complex still differ in efficacy
    effic = truth[truth["complex"] == named["complex"].iloc[0]]["efficacy"]
    assert effic.nunique() == len(effic)
    # fewer genes with an effect than the complexes need: as many complexes as fit
    small = sim_design.gene_truth(tiny_demo(n_genes=5, n_null_genes=1, n_complexes=2, genes_per_complex=3))
    assert small.loc[small["complex"] != "", "complex"].nunique() == 1
    # more genes than the list has complexes for: synthetic names for the rest
    big = sim_design.gene_truth(tiny_demo(n_genes=60, n_null_genes=20, wells_per_guide_per_plate=1, guides_per_gene=1))
    big = big[big[screen.PERT_TYPE] == screen.PERTURBATION]
    assert big[screen.GENE].str.startswith("SIM").sum() > 0 and big[screen.GENE].is_unique


def test_metadata_contract_counts_and_shuffled_wells(demo, plates):
    n_guides = 3 * 2
    wells = n_guides * demo.wells_per_guide_per_plate + demo.control_wells_per_plate
    layouts = []
    for (batch, plate), (tiles, metadata, factors) in zip(demo.plates(), plates.values()):
        checked = screen.validate_metadata(metadata, source=plate)
        assert list(checked.columns[:8]) == list(screen.REQUIRED_COLUMNS)
        assert len(metadata) == wells * demo.sites_per_well == tiles.shape[0] == len(factors)
        assert (metadata[screen.BATCH] == batch).all() and (metadata[screen.PLATE] == plate).all()
        assert (metadata[screen.IMAGE_INDEX].to_numpy() == np.arange(len(metadata))).all()
        per_guide = metadata[metadata[screen.PERT_TYPE] == screen.PERTURBATION].groupby(screen.GUIDE).size()
        assert len(per_guide) == n_guides and (per_guide == demo.sites_per_well).all()
        ctrl = metadata[metadata[screen.PERT_TYPE] == screen.CONTROL]
        assert len(ctrl) == demo.control_wells_per_plate * demo.sites_per_well
        assert ctrl[screen.GUIDE].nunique() == 4 and (ctrl[screen.GENE] == sim_design.CONTROL_GENE).all()
        assert metadata.groupby(screen.WELL)[screen.GUIDE].nunique().max() == 1
        assert (metadata[screen.WELL] == metadata["Metadata_Row"] + metadata["Metadata_Col"].map("{:02d}".format)).all()
        assert (factors[screen.IMAGE_INDEX] == metadata[screen.IMAGE_INDEX]).all()
        layouts.append(metadata.drop_duplicates(screen.WELL).set_index(screen.GUIDE)[screen.WELL])
    pert_guides = [g for g in layouts[0].index if not g.startswith("NTC")]
    assert (layouts[0][pert_guides] != layouts[1][pert_guides]).any()  # positions shuffled per plate


def test_unknown_plate_and_bad_config_are_clear_errors(demo):
    with pytest.raises(ValueError, match="B09P01.*B01P01"):
        sim_plates.simulate_plate(demo, "B09P01")
    with pytest.raises(ValueError, match="demo.factors_per_gene"):
        sim_design.gene_truth(demo._replace(factors_per_gene=demo.n_factors + 1))
    with pytest.raises(ValueError, match="demo.n_factors"):
        sim_design.gene_truth(demo._replace(n_factors=len(sim_design.FACTORS) + 1, factors_per_gene=1))
    with pytest.raises(ValueError, match="wells per plate"):
        sim_layout.plate_layout(demo._replace(control_wells_per_plate=2000), "B01P01")


# ------------------------------------------------------------------ determinism


def test_the_two_seeded_generators_known_answers():
    """rng_for seeds with derive_seed's integer, rng_from_sequence (the simulator's) with the
    SeedSequence of the same words: two pinned streams that stay apart."""
    words = [7, int.from_bytes(hashlib.sha256(b"plate").digest()[:4], "little"), 3]
    assert words == [7, 1388533307, 3] and derive_seed(7, "plate", 3) == 722191565
    assert rng_for(7, "plate", 3).integers(0, 1000, 4).tolist() == [673, 37, 127, 141]
    assert rng_from_sequence(7, "plate", 3).integers(0, 1000, 4).tolist() == [476, 354, 888, 691]
    np.testing.assert_array_equal(
        rng_from_sequence(7, "plate", 3).random(5), np.random.default_rng(np.random.SeedSequence(words)).random(5)
    )
    np.testing.assert_array_equal(rng_for(7, "plate", 3).random(5), np.random.default_rng(722191565).random(5))
    assert not hasattr(sim_design, "rng_for")  # one definition, in phenoica.utils._seeding


def test_same_seed_same_bytes_other_seed_differs(demo, plates):
    tiles, metadata, factors = sim_plates.simulate_plate(demo, "B01P01")
    ref_tiles, ref_metadata, ref_factors = plates["B01P01"]
    assert tiles.tobytes() == ref_tiles.tobytes()
    pd.testing.assert_frame_equal(metadata, ref_metadata)
    pd.testing.assert_frame_equal(factors, ref_factors)
    other, other_md, other_factors = sim_plates.simulate_plate(demo._replace(seed=SEED + 1), "B01P01")
    assert other.tobytes() != tiles.tobytes()
    assert not np.allclose(other_factors.filter(like="factor_").to_numpy(), factors.filter(like="factor_").to_numpy())


def test_plate_does_not_depend_on_screen_size(demo, plates):
    bigger = tiny_demo(n_batches=3)
    tiles, metadata, factors = sim_plates.simulate_plate(bigger, "B02P01")
    assert tiles.tobytes() == plates["B02P01"][0].tobytes()
    pd.testing.assert_frame_equal(factors, plates["B02P01"][2])


# ------------------------------------------------------------------ factors


def test_factor_distributions_are_standardized_non_gaussian_and_independent():
    n = len(sim_design.FACTORS)
    x = sim_design.draw_factors(20000, n, rng_from_sequence(0, "test"))
    assert np.abs(x.mean(axis=0)).max() < 0.04
    assert np.abs(x.std(axis=0) - 1).max() < 0.05
    skew, kurt = stats.skew(x, axis=0), stats.kurtosis(x, axis=0)
    assert ((np.abs(skew) > 0.5) | (np.abs(kurt) > 0.8)).all(), (skew, kurt)
    gauss = rng_from_sequence(0, "gauss").standard_normal((20000, 1))  # the same check rejects a Gaussian
    assert not (abs(stats.skew(gauss)[0]) > 0.5 or abs(stats.kurtosis(gauss)[0]) > 0.8)
    corr = np.corrcoef(x, rowvar=False)
    assert np.abs(corr - np.eye(n)).max() < 0.05


def test_control_factors_on_a_plate_are_centred_non_gaussian_and_uncorrelated():
    demo = tiny_demo(control_wells_per_plate=96, sites_per_well=4, image_size=16, cells_per_image=2)
    _, metadata, factors = sim_plates.simulate_plate(demo, "B01P01")
    ctrl = factors.loc[metadata[screen.PERT_TYPE] == screen.CONTROL].filter(like="factor_").to_numpy()
    n = len(ctrl)
    assert n == 384 and ctrl.shape[1] == demo.n_factors
    assert np.abs(ctrl.mean(axis=0)).max() < 4 / np.sqrt(n)
    non_gaussian = (np.abs(stats.skew(ctrl, axis=0)) > 0.4) | (np.abs(stats.kurtosis(ctrl, axis=0)) > 0.6)
    assert non_gaussian.mean() >= 0.8
    corr = np.corrcoef(ctrl, rowvar=False)
    assert np.abs(corr - np.eye(ctrl.shape[1])).max() < 0.2


def test_gene_shifts_exactly_its_affected_factors_on_every_plate():
    on, off = tiny_demo(effect_size=1.5), tiny_demo(effect_size=0.0)
    truth = sim_design.gene_truth(on)
    pd.testing.assert_frame_equal(truth, sim_design.gene_truth(off))  # effect_size only scales
    truth = truth.set_index(screen.GUIDE)
    for _, plate in on.plates():
        _, metadata, with_effect = sim_plates.simulate_plate(on, plate)
        _, _, without = sim_plates.simulate_plate(off, plate)
        cols = [sim_design.factor_name(j) for j in range(on.n_factors)]
        diff = with_effect[cols].to_numpy() - without[cols].to_numpy()
        for guide, rows in metadata.groupby(screen.GUIDE).groups.items():
            expected = np.zeros(len(cols))
            row = truth.loc[guide]
            for item in filter(None, row["affected_factors"].split(",")):
                sign = 1.0 if item[-1] == "+" else -1.0
                expected[cols.index(item[:-1])] = sign * 1.5 * row["efficacy"]
            np.testing.assert_allclose(diff[rows], np.tile(expected, (len(rows), 1)), atol=1e-12)
            assert (np.count_nonzero(expected) == on.factors_per_gene) == bool(row["has_effect"])


def test_gene_images_differ_from_controls_only_in_affected_factors():
    demo = tiny_demo(
        effect_size=2.0,
        n_null_genes=1,
        sites_per_well=16,
        wells_per_guide_per_plate=2,
        control_wells_per_plate=16,
        image_size=16,
        cells_per_image=2,
    )
    _, metadata, factors = sim_plates.simulate_plate(demo, "B01P01")
    shifts = sim_design.guide_shifts(demo)
    truth = sim_design.gene_truth(demo)
    cols = list(shifts.columns)
    ctrl = factors.loc[metadata[screen.PERT_TYPE] == screen.CONTROL, cols]
    for gene, rows in metadata[metadata[screen.PERT_TYPE] == screen.PERTURBATION].groupby(screen.GENE):
        observed = factors.loc[rows.index, cols].mean() - ctrl.mean()
        expected = shifts.loc[rows[screen.GUIDE]].mean()
        se = np.sqrt(1 / len(rows) + 1 / len(ctrl))
        assert (np.abs(observed - expected) < 4 * se).all(), gene
        if truth.loc[truth[screen.GENE] == gene, "has_effect"].iloc[0]:
            hit = expected != 0
            assert (np.sign(observed[hit]) == np.sign(expected[hit])).all()
            assert (np.abs(observed[hit]) > 4 * se).all()
        else:
            assert (expected == 0).all()


# ------------------------------------------------------------------ images


def test_images_shape_dtype_and_dynamic_range(demo, plates):
    for tiles, metadata, _ in plates.values():
        assert tiles.shape == (len(metadata), 5, 32, 32) and tiles.dtype == np.uint8
        for c in range(tiles.shape[1]):
            channel = tiles[:, c]
            assert np.percentile(channel, 99.5) > 0.2 * 255, c
            assert (channel == 255).mean() < 0.01, c
            assert np.median(channel) > 0, c  # background offset + noise, not a black frame
    tiles16, _, _ = sim_plates.simulate_plate(tiny_demo(dtype="uint16", channels=["dna", "actin", "x"]), "B01P01")
    assert tiles16.dtype == np.uint16 and tiles16.shape[1] == 3 and tiles16.max() > 255


def test_channel_roles_by_name_then_position():
    assert sim_cells.channel_roles(["nucleus", "er", "actin", "mito", "golgi"]) == list(sim_cells.ROLES)
    assert sim_cells.channel_roles(["dna", "Mito", "c2", "c3", "c4", "c5"]) == [
        "nucleus",
        "mito",
        "actin",
        "mito",
        "golgi",
        "er",
    ]


def test_nucleus_area_grows_with_nucleus_size_factor():
    size_col = [name for name, _ in sim_design.FACTORS].index("nucleus_size")
    areas = []
    for value in (-2.0, -1.0, 0.0, 1.0, 2.0):
        factors = np.zeros((16, 10))
        factors[:, size_col] = value
        clean = sim_cells.render_cells(factors, ["nucleus", "er"], 48, 4, rng_from_sequence(0, "layout"))
        areas.append(float((clean[:, 0] > 0.15).mean()))
    assert np.all(np.diff(areas) > 0), areas
    assert areas[-1] > 1.8 * areas[0]


def test_nucleus_area_tracks_factor_in_simulated_plate():
    demo = tiny_demo(control_wells_per_plate=48, image_size=32)
    tiles, _, factors = sim_plates.simulate_plate(demo, "B01P01")
    area = (tiles[:, 0] > 0.3 * 255).mean(axis=(1, 2))
    assert stats.spearmanr(area, factors["factor_01"]).statistic > 0.25


FACTOR_NAMES = [name for name, _ in sim_design.FACTORS]
CHANNELS = list(sim_cells.ROLES)


def render_one(name: str, value: float, n: int = 8, size: int = 48, **kwargs) -> np.ndarray:
    """n images with one factor at ``value`` and every other factor at 0, the same layout draws."""
    factors = np.zeros((n, len(sim_design.FACTORS)))
    factors[:, FACTOR_NAMES.index(name)] = value
    return sim_cells.render_cells(factors, CHANNELS, size, 5, rng_from_sequence(0, "layout"), **kwargs)


def normalized(images: np.ndarray) -> np.ndarray:
    """The MAE's per-image, per-channel instance normalization (phenoica.screen._preprocess)."""
    return preprocess.normalize_per_channel(torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32))).numpy()


# What each factor may change (channels by role); a factor must change its channels after
# per-image per-channel normalization and leave the others exactly alone.
CHANNELS_OF = {
    "er_translocation": {"er"},
    "chromatin_condensation": {"nucleus"},
    "actin_fibers": {"actin"},
    "mito_density": {"mito"},
    "golgi_punctate": {"golgi"},
    "er_network_scale": {"er"},
    "mito_perinuclear": {"mito"},
    "golgi_spread": {"golgi"},
    "mito_size": {"mito"},
}


@pytest.mark.parametrize("name", FACTOR_NAMES)
def test_every_factor_survives_instance_normalization(name):
    low, high = normalized(render_one(name, -2.0)), normalized(render_one(name, 2.0))
    change = np.sqrt(((high - low) ** 2).mean(axis=(0, 2, 3)))  # per channel; normalized SD is 1
    allowed = CHANNELS_OF.get(name, set(CHANNELS))
    touched = {c for c, v in zip(CHANNELS, change) if v > 0.25}
    assert touched and touched <= allowed, (name, dict(zip(CHANNELS, change.round(3))))
    untouched = [v for c, v in zip(CHANNELS, change) if c not in allowed]
    assert np.allclose(untouched, 0.0, atol=1e-5), (name, dict(zip(CHANNELS, change.round(3))))


def test_a_pure_intensity_change_is_erased_by_normalization():
    """The control for the test above: what the MAE's preprocessing removes, no factor does."""
    images = render_one("cell_size", 0.0)
    brighter = images * np.array([1.7, 0.6, 1.0, 2.0, 1.3], dtype=np.float32)[None, :, None, None]
    np.testing.assert_allclose(normalized(brighter), normalized(images), atol=1e-4)


def nuclear_fraction(images: np.ndarray, channel: int) -> np.ndarray:
    """Share of a channel's signal inside nuclei (the DNA channel's mask), per image."""
    nuclei = images[:, 0] > 0.5 * images[:, 0].max(axis=(1, 2), keepdims=True)
    signal = images[:, channel]
    return (signal * nuclei).sum(axis=(1, 2)) / signal.sum(axis=(1, 2))


def test_translocation_moves_the_er_marker_into_nuclei():
    fractions = [nuclear_fraction(render_one("er_translocation", v), 1).mean() for v in (-2, -1, 0, 1, 2)]
    assert np.all(np.diff(fractions) > 0), fractions
    assert fractions[-1] > 3 * fractions[0]


def test_golgi_marker_moves_from_diffuse_cytoplasm_into_puncta():
    def peak_share(images):  # share of the channel's signal in its brightest 5% of pixels
        x = images[:, 4].reshape(len(images), -1)
        top = np.sort(x, axis=1)[:, -x.shape[1] // 20 :]
        return (top.sum(axis=1) / x.sum(axis=1)).mean()

    shares = [peak_share(render_one("golgi_punctate", v)) for v in (-2, 0, 2)]
    assert shares[0] < shares[1] < shares[2] and shares[2] > 1.5 * shares[0], shares


def test_actin_fibres_gain_on_the_cortex():
    def interior_share(images):  # actin signal away from cell borders / all actin signal
        x = images[:, 2]
        cells = images[:, 1] + images[:, 0] > 0.05  # cytoplasm (ER) or nucleus
        return (x * cells).sum() / x.sum()

    def fibre_share(images):
        return np.percentile(images[:, 2][images[:, 2] > 0.02], 90) / np.median(images[:, 2][images[:, 2] > 0.02])

    low, high = render_one("actin_fibers", -2.0), render_one("actin_fibers", 2.0)
    assert fibre_share(high) > fibre_share(low) * 1.2
    assert interior_share(high) > interior_share(low)


def nuclei_counts(images: np.ndarray) -> np.ndarray:
    return np.array([measure.label(img[0] > 0.25).max() for img in images])


def test_cell_count_factor_sets_the_number_of_nuclei():
    values = np.linspace(-2.5, 2.5, 24)
    factors = np.zeros((24, 10))
    factors[:, 0] = values
    images = sim_cells.render_cells(factors, CHANNELS, 64, 6, rng_from_sequence(0, "count"))
    counts = nuclei_counts(images)
    assert stats.spearmanr(values, counts).statistic > 0.85, counts
    assert counts[-4:].mean() > 3 * counts[:4].mean(), counts


def test_zoom_nuisance_changes_apparent_size_and_count():
    factors = np.zeros((16, 10))
    near = sim_cells.render_cells(factors, CHANNELS, 64, 6, rng_from_sequence(0, "z"), zoom=np.full(16, 1.25))
    far = sim_cells.render_cells(factors, CHANNELS, 64, 6, rng_from_sequence(0, "z"), zoom=np.full(16, 0.8))

    def area(images: np.ndarray) -> np.ndarray:  # mean nucleus area per image, px
        return (images[:, 0] > 0.25).sum(axis=(1, 2)) / np.maximum(nuclei_counts(images), 1)

    assert area(near).mean() > 1.8 * area(far).mean()
    assert nuclei_counts(near).mean() < nuclei_counts(far).mean()
    with pytest.raises(ValueError, match="zoom"):
        sim_cells.render_cells(factors, CHANNELS, 64, 6, rng_from_sequence(0, "z"), zoom=np.full(16, 3.0))


def test_zoom_is_a_batch_nuisance():
    demo = tiny_demo(n_batches=4, plates_per_batch=2)
    zoom = {p: sim_nuisance.nuisance_table(demo, p, 50)["nuisance_zoom"] for _, p in demo.plates()}
    lo, hi = sim_cells.ZOOM_RANGE
    assert all(z.between(lo, hi).all() for z in zoom.values())
    per_batch = [np.log(zoom[f"B0{b}P01"].mean()) for b in range(1, 5)]
    within = np.mean([abs(np.log(zoom[f"B0{b}P01"].mean() / zoom[f"B0{b}P02"].mean())) for b in range(1, 5)])
    assert np.std(per_batch) > 2 * within > 0
    flat = sim_nuisance.nuisance_table(demo._replace(batch_strength=0.0), "B02P01", 5)
    assert (flat["nuisance_zoom"] == 1.0).all()


def handcrafted_features(tiles: np.ndarray) -> np.ndarray:
    """Simple per-image features of *normalized* images, per channel: intensity quantiles,
    radial power spectrum bands, channel correlations and the mean structure-tensor
    anisotropy (coherence). An ideal observer would do better."""
    x = preprocess.normalize_per_channel(preprocess.scale_intensity(tiles)).numpy()
    n, c, h, w = x.shape
    flat = x.reshape(n, c, -1)
    quantiles = np.quantile(flat, [0.25, 0.5, 0.75, 0.9, 0.95, 0.99], axis=2).transpose(1, 2, 0).reshape(n, -1)
    power = np.abs(np.fft.rfft2(x)) ** 2
    k = np.sqrt(np.fft.fftfreq(h)[:, None] ** 2 + np.fft.rfftfreq(w)[None, :] ** 2)
    edges = np.linspace(0.0, 0.5, 9)
    bands = [np.log(power[..., (k >= a) & (k < b)].mean(-1) + 1e-9) for a, b in zip(edges[:-1], edges[1:])]
    corr = np.einsum("ncp,ndp->ncd", flat, flat)[(slice(None), *np.triu_indices(c, 1))] / flat.shape[2]
    coherence = np.empty((n, c))
    for i in range(n):
        for j in range(c):
            a_rr, a_rc, a_cc = feature.structure_tensor(x[i, j], sigma=2.0, order="rc")
            spread = np.sqrt(np.maximum((a_rr - a_cc) ** 2 / 4 + a_rc**2, 0.0))
            coherence[i, j] = 2 * spread.mean() / ((a_rr + a_cc).mean() + 1e-9)
    return np.concatenate([quantiles, *bands, corr, coherence], axis=1)


def test_factors_are_recoverable_from_normalized_images_despite_batch_effects():
    """Hand-made features of normalized images (not the MAE) predict every factor held-out:
    the simulator's phenotypes survive the MAE's preprocessing and the nuisances."""
    demo = tiny_demo(n_batches=2, control_wells_per_plate=60, sites_per_well=4, image_size=48, cells_per_image=5)
    tiles, factors = [], []
    for _, plate in demo.plates():
        t, _, f = sim_plates.simulate_plate(demo, plate)
        tiles.append(t)
        factors.append(f)
    names = [sim_design.factor_name(j) for j in range(demo.n_factors)]
    table = pd.concat(factors)
    r2 = metrics.probe_r2(handcrafted_features(np.concatenate(tiles)), table[names].to_numpy())
    assert r2.mean() > 0.6 and r2.min() > 0.3, dict(zip(FACTOR_NAMES, r2.round(2)))


def test_batch_effects_change_pixels_of_the_same_cells():
    demo = tiny_demo(n_batches=3, plates_per_batch=2)
    factors = sim_design.draw_factors(12, demo.n_factors, rng_from_sequence(0, "f"))
    clean = sim_cells.render_cells(factors, demo.channels, 32, 4, rng_from_sequence(0, "r"))

    def image(d: DemoOptions, plate: str) -> np.ndarray:
        nuisance = sim_nuisance.nuisance_table(d, plate, len(clean))
        return sim_nuisance.apply_nuisance(
            clean, nuisance, d.channels, d.noise, "uint8", rng_from_sequence(0, "noise")
        ).astype(float)

    a, b = image(demo, "B01P01"), image(demo, "B02P01")
    means_a, means_b = a.mean(axis=(0, 2, 3)), b.mean(axis=(0, 2, 3))
    assert np.max(np.abs(np.log(means_a / means_b))) > 0.1
    # Batch effects outweigh plate effects: plates of one batch look more alike.
    gains = {
        p: np.log(sim_nuisance.nuisance_table(demo, p, 1).filter(like="gain_").to_numpy()[0]) for _, p in demo.plates()
    }
    within = np.mean([np.linalg.norm(gains[f"B0{b}P01"] - gains[f"B0{b}P02"]) for b in (1, 2, 3)])
    between = np.mean([np.linalg.norm(gains[f"B0{b}P01"] - gains[f"B0{c}P01"]) for b, c in ((1, 2), (1, 3), (2, 3))])
    assert within < between
    # Without batch strength every plate sees the same microscope.
    flat = demo._replace(batch_strength=0.0)
    assert np.array_equal(image(flat, "B01P01"), image(flat, "B03P02"))
    assert not np.array_equal(image(flat, "B01P01"), a)


# ------------------------------------------------------------------ writing


def test_write_demo_plate_round_trip(demo, plates, tmp_path):
    store = tmp_path / "plates" / "B01P01.zarr"
    sim_plates.write_demo_plate(demo, "B01P01", store, tmp_path / "md.parquet", tmp_path / "f.parquet")
    tiles, metadata, factors = plates["B01P01"]
    stored = screen.open_plate(store)
    assert stored.chunks[0] == demo.chunk_images
    np.testing.assert_array_equal(stored[:], tiles)
    assert screen.plate_channels(store) == demo.channels
    pd.testing.assert_frame_equal(screen.read_metadata(tmp_path / "md.parquet"), screen.validate_metadata(metadata))
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "f.parquet"), factors)
    assert not [p for p in tmp_path.rglob("*") if ".tmp-" in p.name]


def test_simulate_screen_writes_every_plate(demo, tmp_path):
    metadata = sim_plates.simulate_screen(demo, tmp_path)
    plates = [p for _, p in demo.plates()]
    assert screen.plates_of(metadata) == plates
    pd.testing.assert_frame_equal(screen.read_metadata(tmp_path / "metadata.parquet"), metadata)
    for plate in plates:
        rows = metadata[metadata[screen.PLATE] == plate]
        tiles = screen.open_plate(tmp_path / "plates" / f"{plate}.zarr")
        screen.check_plate_against_metadata(tiles, rows, plate)
        assert tiles.shape[0] == len(rows) == len(pd.read_parquet(tmp_path / "factors" / f"{plate}.parquet"))
    guides = metadata.groupby(screen.BATCH)[screen.GUIDE].apply(set)
    assert all(g == guides.iloc[0] for g in guides)  # every batch has every guide


def test_a_plate_reruns_for_what_it_depends_on_only():
    """The rules' params (the options' repr) leave out the screen's size and the chunk length,
    which change no existing plate, and hold every key that does."""
    demo = tiny_demo()
    assert repr(demo) == repr(tiny_demo(n_batches=3, plates_per_batch=2, chunk_images=4))
    assert repr(demo) != repr(tiny_demo(noise=0.1)) and repr(demo) != repr(demo._replace(seed=SEED + 1))
