"""Factor datasets for the disentanglement study (Nelson et al. 2026 Table 2).

Every loader returns a :class:`FactorDataset`: images ``(N, H, W, 3)`` uint8 (an in-memory
array, or a lazily read HDF5 dataset) and factors ``(N, K)`` as integer class codes
``0 .. size_k - 1`` with their names and sizes.

Standard files (paths from config ``disentangle``):

- Shapes3D: ``3dshapes.h5`` (h5py) with ``images`` ``(N, 64, 64, 3)`` uint8 and ``labels``
  ``(N, 6)`` float; each label column's sorted distinct values become the codes (sizes
  ``[10, 10, 10, 8, 4, 15]``).
- MPI3D (real-complex): ``.npz`` with ``images`` ``(N, 64, 64, 3)``. The file holds no labels:
  image ``n`` has the factors ``numpy.unravel_index(n, sizes)`` (row-major over
  ``[4, 4, 2, 3, 3, 40, 40]``, 460,800 images), so ``N`` must equal the product of the sizes.
- Falcor3D / Isaac3D: a folder of images (PNG/JPEG, sorted by file name) and a label file with
  one row per image in that order: a NumPy array file (``.npy`` format, any extension, e.g.
  Falcor3D's ``train-rec.labels``) or a CSV without header, ``(N, 7)`` resp. ``(N, 9)``.
  Images are resized to ``image_size`` (default 64) with Pillow's box filter.

``max_images`` (all loaders) keeps a seeded random subset of that many images, read into memory.

The procedural dataset (:func:`procedural_dataset`) is drawn by phenoica itself: one coloured
shape on a coloured background per image, with seven independent factors drawn uniformly
(``PROCEDURAL_FACTORS``); :func:`render_shapes` is deterministic, so the factors are exactly
recoverable from the generator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from phenoica.studies.disentangle._options import DisentangleTrainOptions

SHAPES3D_FACTORS: tuple[str, ...] = ("floor_hue", "wall_hue", "object_hue", "scale", "shape", "orientation")
SHAPES3D_SIZES: tuple[int, ...] = (10, 10, 10, 8, 4, 15)
MPI3D_FACTORS: tuple[str, ...] = (
    "object_color",
    "object_shape",
    "object_size",
    "camera_height",
    "background_color",
    "horizontal_axis",
    "vertical_axis",
)
MPI3D_SIZES: tuple[int, ...] = (4, 4, 2, 3, 3, 40, 40)
FOLDER_DATASETS: dict[str, dict[str, Any]] = {
    "falcor3d": {
        "n_factors": 7,
        "n_images": 233_280,
        "names": ("lighting_intensity", "lighting_x", "lighting_y", "lighting_z", "camera_x", "camera_y", "camera_z"),
    },
    "isaac3d": {
        "n_factors": 9,
        "n_images": 737_280,
        "names": (
            "object_shape",
            "robot_x",
            "robot_y",
            "camera_height",
            "object_scale",
            "lighting_intensity",
            "lighting_direction",
            "object_color",
            "wall_color",
        ),
    },
}
IMAGE_SUFFIXES: tuple[str, ...] = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")

# Procedural dataset: factor name -> number of levels.
PROCEDURAL_FACTORS: dict[str, int] = {
    "shape": 3,  # ellipse (2:1), isosceles triangle, T
    "scale": 3,
    "orientation": 6,  # 0, 30, ..., 150 degrees (all distinct for the three shapes)
    "pos_x": 5,
    "pos_y": 5,
    "hue": 6,  # object hue
    "bg_hue": 4,  # background hue (darker, less saturated)
}
SHAPE_NAMES: tuple[str, ...] = ("ellipse", "triangle", "tee")

# Scenes dataset (Shapes3D-like: every factor changes a large part of the image): name -> levels.
SCENE_FACTORS: dict[str, int] = {
    "floor_hue": 8,
    "wall_hue": 8,
    "object_hue": 8,
    "scale": 5,
    "shape": 3,  # disc, square, triangle
    "orientation": 7,  # view tilt -30 ... +30 degrees: the horizon and the object turn together
}
SCENE_SHAPES: tuple[str, ...] = ("disc", "square", "triangle")


@dataclass
class FactorDataset:
    """Images with known discrete generative factors.

    ``images``: ``(N, H, W, 3)`` uint8, a NumPy array or an h5py dataset (read lazily by
    :meth:`batch`). ``factors``: ``(N, K)`` int64 codes. ``sizes``: levels per factor.
    """

    name: str
    images: Any
    factors: np.ndarray
    factor_names: tuple[str, ...]
    sizes: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        shape = tuple(self.images.shape)
        if len(shape) != 4 or shape[3] != 3 or shape[1] != shape[2]:
            raise ValueError(f"{self.name}: images must be (N, H, H, 3), got {shape}")
        f = np.asarray(self.factors)
        if f.ndim != 2 or f.shape[0] != shape[0] or f.shape[1] != len(self.factor_names):
            raise ValueError(f"{self.name}: factors must be (N={shape[0]}, K={len(self.factor_names)}), got {f.shape}")
        self.factors = f.astype(np.int64)
        if not self.sizes:
            self.sizes = tuple(int(c) + 1 for c in self.factors.max(axis=0))

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def image_size(self) -> int:
        return int(self.images.shape[1])

    def batch(self, index: np.ndarray) -> np.ndarray:
        """Images at ``index`` as ``(n, 3, H, W)`` float32 in [0, 1] (h5py needs sorted reads)."""
        index = np.asarray(index, dtype=np.int64)
        if isinstance(self.images, np.ndarray):
            raw = self.images[index]
        else:
            order = np.argsort(index)
            sorted_idx = index[order]
            uniq, inverse = np.unique(sorted_idx, return_inverse=True)
            block = np.asarray(self.images[uniq])[inverse]
            raw = np.empty_like(block)
            raw[order] = block
        return np.ascontiguousarray(raw.transpose(0, 3, 1, 2), dtype=np.float32) / 255.0

    def subset(self, index: np.ndarray) -> "FactorDataset":
        """An in-memory dataset of the images at ``index`` (in that order)."""
        index = np.asarray(index, dtype=np.int64)
        order = np.argsort(index)
        images = np.empty((index.size, *self.images.shape[1:]), dtype=np.uint8)
        images[order] = np.asarray(self.images[np.sort(index)])
        return FactorDataset(self.name, images, self.factors[index], self.factor_names, self.sizes)


def eval_index(n: int, n_eval: int, seed: int) -> np.ndarray:
    """A fixed seeded subset of ``min(n_eval, n)`` image indices, sorted."""
    if n_eval < 2:
        raise ValueError(f"n_eval must be >= 2, got {n_eval}")
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=min(int(n_eval), n), replace=False))


def _maybe_subset(ds: FactorDataset, max_images: int | None, seed: int) -> FactorDataset:
    if max_images is None or max_images >= len(ds):
        return ds
    rng = np.random.default_rng(seed)
    return ds.subset(np.sort(rng.choice(len(ds), size=int(max_images), replace=False)))


def codes_from_labels(labels: np.ndarray, source: str) -> np.ndarray:
    """Each label column's sorted distinct values as codes 0, 1, ... (label encoding)."""
    labels = np.asarray(labels)
    if labels.ndim != 2:
        raise ValueError(f"{source}: labels must be 2-D (images x factors), got shape {labels.shape}")
    if not np.isfinite(labels.astype(np.float64)).all():
        raise ValueError(f"{source}: labels hold non-finite values")
    return np.stack([np.unique(labels[:, k], return_inverse=True)[1].ravel() for k in range(labels.shape[1])], axis=1)


def _require_file(path: str | Path | None, what: str) -> Path:
    if not path:
        raise ValueError(f"{what}: no path configured")
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: {what} not found")
    return p


def load_shapes3d(path: str | Path, max_images: int | None = None, seed: int = 0) -> FactorDataset:
    """Shapes3D from ``3dshapes.h5`` (keys ``images`` (N,64,64,3) uint8 and ``labels`` (N,6))."""
    import h5py

    p = _require_file(path, "Shapes3D file 3dshapes.h5")
    try:
        h5 = h5py.File(p, "r")
    except OSError as err:
        raise ValueError(f"{p}: not a readable HDF5 file (expected Shapes3D's 3dshapes.h5): {err}") from err
    for key in ("images", "labels"):
        if key not in h5:
            raise ValueError(
                f"{p}: missing dataset {key!r}; expected keys 'images' (N,64,64,3) and 'labels' (N,6), found {sorted(h5)}"
            )
    images, labels = h5["images"], h5["labels"]
    if images.ndim != 4 or images.shape[1:] != (64, 64, 3) or images.dtype != np.uint8:
        raise ValueError(f"{p}: 'images' must be uint8 (N, 64, 64, 3), got {images.dtype} {images.shape}")
    if labels.shape != (images.shape[0], len(SHAPES3D_FACTORS)):
        raise ValueError(f"{p}: 'labels' must be (N={images.shape[0]}, 6), got {labels.shape}")
    codes = codes_from_labels(labels[()], f"{p} 'labels'")
    too_many = [
        (n, int(c.max()) + 1, s) for n, c, s in zip(SHAPES3D_FACTORS, codes.T, SHAPES3D_SIZES) if c.max() + 1 > s
    ]
    if too_many:
        raise ValueError(
            f"{p}: factor(s) with more distinct values than Shapes3D has (name, found, expected): {too_many}"
        )
    ds = FactorDataset("shapes3d", images, codes, SHAPES3D_FACTORS, SHAPES3D_SIZES)
    return _maybe_subset(ds, max_images, seed)


def load_mpi3d(
    path: str | Path, factor_sizes: Sequence[int] = MPI3D_SIZES, max_images: int | None = None, seed: int = 0
) -> FactorDataset:
    """MPI3D from its ``.npz`` (key ``images`` (N,64,64,3)); factors = row-major index over ``factor_sizes``."""
    p = _require_file(path, "MPI3D .npz file")
    sizes = tuple(int(s) for s in factor_sizes)
    if len(sizes) != len(MPI3D_FACTORS) or min(sizes) < 1:
        raise ValueError(f"MPI3D factor_sizes: expected {len(MPI3D_FACTORS)} positive sizes, got {list(sizes)}")
    try:
        npz = np.load(p, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise ValueError(f"{p}: not a readable .npz file (expected MPI3D with key 'images'): {err}") from err
    if not hasattr(npz, "files") or "images" not in npz.files:
        found = list(getattr(npz, "files", []))
        raise ValueError(f"{p}: expected an .npz with key 'images' (N, 64, 64, 3), found keys {found}")
    images = npz["images"]
    if images.ndim != 4 or images.shape[1:] != (64, 64, 3):
        raise ValueError(f"{p}: 'images' must be (N, 64, 64, 3), got {images.shape}")
    n = int(np.prod(sizes))
    if images.shape[0] != n:
        raise ValueError(
            f"{p}: 'images' has {images.shape[0]} rows but factor sizes {list(sizes)} imply {n} "
            "(the file has no labels: image n has factors unravel_index(n, sizes))"
        )
    codes = np.stack(np.unravel_index(np.arange(n), sizes), axis=1)
    ds = FactorDataset("mpi3d", images.astype(np.uint8, copy=False), codes, MPI3D_FACTORS, sizes)
    return _maybe_subset(ds, max_images, seed)


def _read_labels(path: Path) -> np.ndarray:
    """A label file: NumPy array format (any extension) or a headerless CSV."""
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic == b"\x93NUMPY":
        return np.load(path, allow_pickle=False)
    try:
        return pd.read_csv(path, header=None).to_numpy()
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: expected a NumPy .npy array or a headerless CSV of labels: {err}") from err


def load_image_folder(
    name: str,
    images_dir: str | Path,
    labels: str | Path,
    image_size: int = 64,
    max_images: int | None = None,
    seed: int = 0,
) -> FactorDataset:
    """Falcor3D / Isaac3D: images sorted by file name, labels one row per image, resized with Pillow."""
    from PIL import Image

    if name not in FOLDER_DATASETS:
        raise ValueError(f"image-folder dataset must be one of {sorted(FOLDER_DATASETS)}, got {name!r}")
    spec = FOLDER_DATASETS[name]
    folder = _require_file(images_dir, f"{name} image folder")
    if not folder.is_dir():
        raise ValueError(f"{folder}: expected a folder of {name} images")
    files = sorted(f for f in folder.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise ValueError(f"{folder}: no image files ({', '.join(IMAGE_SUFFIXES)}) found for {name}")
    label_path = _require_file(labels, f"{name} label file")
    values = _read_labels(label_path)
    k = spec["n_factors"]
    if values.ndim != 2 or values.shape != (len(files), k):
        raise ValueError(f"{label_path}: labels must be (n_images={len(files)}, {k}) for {name}, got {values.shape}")
    codes = codes_from_labels(values, str(label_path))
    keep = np.arange(len(files))
    if max_images is not None and max_images < len(files):
        keep = np.sort(np.random.default_rng(seed).choice(len(files), size=int(max_images), replace=False))
    images = np.empty((keep.size, image_size, image_size, 3), dtype=np.uint8)
    for row, i in enumerate(keep):
        try:
            with Image.open(files[i]) as im:
                im = im.convert("RGB")
                if im.size != (image_size, image_size):
                    im = im.resize((image_size, image_size), Image.Resampling.BOX)
                images[row] = np.asarray(im)
        except OSError as err:
            raise ValueError(f"{files[i]}: unreadable image ({err})") from err
    sizes = tuple(int(c.max()) + 1 for c in codes.T)
    return FactorDataset(name, images, codes[keep], spec["names"], sizes)


# --------------------------------------------------------------------------- procedural dataset


def _hsv_to_rgb(h: np.ndarray, s: float, v: float) -> np.ndarray:
    """Hue array in [0, 1) with fixed saturation/value to RGB rows ``(n, 3)`` in [0, 1]."""
    i = np.floor(h * 6).astype(int) % 6
    f = h * 6 - np.floor(h * 6)
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    table = np.stack(
        [
            np.stack([np.full_like(h, v), t, np.full_like(h, p)], 1),
            np.stack([q, np.full_like(h, v), np.full_like(h, p)], 1),
            np.stack([np.full_like(h, p), np.full_like(h, v), t], 1),
            np.stack([np.full_like(h, p), q, np.full_like(h, v)], 1),
            np.stack([t, np.full_like(h, p), np.full_like(h, v)], 1),
            np.stack([np.full_like(h, v), np.full_like(h, p), q], 1),
        ]
    )
    return table[i, np.arange(h.size)]


def render_shapes(
    factors: np.ndarray, image_size: int = 32, supersample: int = 2, object_scale: float = 1.0
) -> np.ndarray:
    """Render procedural images ``(n, S, S, 3)`` uint8 from factor codes ``(n, 7)`` (``PROCEDURAL_FACTORS`` order).

    One shape (ellipse 2:1, isosceles triangle, or T) on a plain background of one of 4 hues; its scale, rotation
    (multiples of 30 degrees below 180), centre on a 5 x 5 grid and hue are set by the codes.
    Anti-aliased by ``supersample`` x ``supersample`` subpixels. ``object_scale`` multiplies every
    shape's radius (1: radii 0.16, 0.21, 0.26 of the image side; shapes may then reach past the
    border and are clipped). Deterministic.
    """
    f = np.asarray(factors, dtype=np.int64)
    sizes = np.array(list(PROCEDURAL_FACTORS.values()))
    if f.ndim != 2 or f.shape[1] != sizes.size:
        raise ValueError(f"render_shapes: factors must be (n, {sizes.size}), got {f.shape}")
    if (f < 0).any() or (f >= sizes).any():
        raise ValueError(f"render_shapes: codes must lie in [0, size) for sizes {sizes.tolist()}")
    if not object_scale > 0:
        raise ValueError(f"render_shapes: object_scale must be > 0, got {object_scale}")
    n, s = f.shape[0], int(image_size)
    g = ((np.arange(s * supersample) + 0.5) / (s * supersample)).astype(np.float32)  # subpixel centres
    shape, scale, rot, px, py, hue, bg = f.T
    cover = np.empty((n, s, s, 1), dtype=np.float32)
    for k in range(len(SHAPE_NAMES)):
        rows = np.flatnonzero(shape == k)
        if rows.size == 0:
            continue
        radius = (object_scale * (0.16 + 0.05 * scale[rows])).astype(np.float32)[:, None, None]
        theta = (np.pi / 6 * rot[rows]).astype(np.float32)[:, None, None]
        dx = g[None, None, :] - (0.3 + 0.1 * px[rows]).astype(np.float32)[:, None, None]
        dy = g[None, :, None] - (0.3 + 0.1 * py[rows]).astype(np.float32)[:, None, None]
        # object frame: the grid rotated by -theta and scaled to unit radius
        u = (np.cos(theta) * dx + np.sin(theta) * dy) / radius
        v = (-np.sin(theta) * dx + np.cos(theta) * dy) / radius
        if k == 0:
            mask = (u * u + 4.0 * v * v) <= 1.0
        elif k == 1:
            mask = (v >= -0.6) & (v <= 1.0) & (np.abs(u) <= 0.55 * (1.0 - v))
        else:
            mask = ((np.abs(u) <= 1.0) & (v >= 0.5) & (v <= 1.0)) | ((np.abs(u) <= 0.28) & (v >= -1.0) & (v < 0.5))
        cover[rows, :, :, 0] = mask.reshape(rows.size, s, supersample, s, supersample).mean(
            axis=(2, 4), dtype=np.float32
        )
    colour = _hsv_to_rgb(hue / PROCEDURAL_FACTORS["hue"], 0.85, 0.95)[:, None, None, :]
    background = _hsv_to_rgb(bg / PROCEDURAL_FACTORS["bg_hue"] + 0.125, 0.4, 0.45)[:, None, None, :]
    img = cover * colour + (1.0 - cover) * background
    return np.round(img * 255).astype(np.uint8)


def render_scenes(factors: np.ndarray, image_size: int = 32, supersample: int = 2) -> np.ndarray:
    """Render Shapes3D-like scenes ``(n, S, S, 3)`` uint8 from factor codes ``(n, 6)`` (``SCENE_FACTORS`` order).

    A wall (upper part) and a floor (lower part) split by a horizon through (0.5, 0.6) tilted by the
    orientation angle (-30 ... +30 degrees in 7 steps); a centred object (disc, square or triangle)
    of radius 0.14 ... 0.28 of the side (5 steps), turned by the same angle, standing on the
    horizon's centre. Wall, floor and object take hues on 8-step circles (wall lighter, floor
    darker, object saturated), so every factor changes many pixels, as in Shapes3D. Anti-aliased
    by ``supersample`` x ``supersample`` subpixels; deterministic.
    """
    f = np.asarray(factors, dtype=np.int64)
    sizes = np.array(list(SCENE_FACTORS.values()))
    if f.ndim != 2 or f.shape[1] != sizes.size:
        raise ValueError(f"render_scenes: factors must be (n, {sizes.size}), got {f.shape}")
    if (f < 0).any() or (f >= sizes).any():
        raise ValueError(f"render_scenes: codes must lie in [0, size) for sizes {sizes.tolist()}")
    n, s = f.shape[0], int(image_size)
    g = ((np.arange(s * supersample) + 0.5) / (s * supersample)).astype(np.float32)
    floor, wall, obj, scale, shape, orient = f.T
    theta = np.deg2rad(-30.0 + 10.0 * orient).astype(np.float32)[:, None, None]
    dx = g[None, None, :] - np.float32(0.5)
    dy = g[None, :, None] - np.float32(0.6)
    # below the tilted horizon: floor (y grows downwards)
    below = (np.cos(theta) * dy - np.sin(theta) * dx) > 0
    radius = (0.14 + 0.035 * scale).astype(np.float32)[:, None, None]
    cy = 0.6 - radius[:, :, :]  # the object stands on the horizon's centre
    ox, oy = dx, g[None, :, None] - cy
    u = (np.cos(theta) * ox + np.sin(theta) * oy) / radius
    v = (-np.sin(theta) * ox + np.cos(theta) * oy) / radius
    disc = u * u + v * v <= 1.0
    square = (np.abs(u) <= 0.85) & (np.abs(v) <= 0.85)
    triangle = (v <= 0.9) & (v >= -1.0) & (np.abs(u) <= 0.55 * (v + 1.0))
    inside = np.where((shape == 0)[:, None, None], disc, np.where((shape == 1)[:, None, None], square, triangle))

    def pool(mask: np.ndarray) -> np.ndarray:
        return mask.reshape(n, s, supersample, s, supersample).mean(axis=(2, 4), dtype=np.float32)[..., None]

    cover, ground = pool(inside), pool(below)
    k = SCENE_FACTORS["floor_hue"]
    floor_rgb = _hsv_to_rgb(floor / k, 0.75, 0.45)[:, None, None, :]
    wall_rgb = _hsv_to_rgb(wall / SCENE_FACTORS["wall_hue"] + 0.5 / k, 0.45, 0.85)[:, None, None, :]
    obj_rgb = _hsv_to_rgb(obj / SCENE_FACTORS["object_hue"] + 0.25 / k, 0.9, 0.95)[:, None, None, :]
    scene = ground * floor_rgb + (1.0 - ground) * wall_rgb
    img = cover * obj_rgb + (1.0 - cover) * scene
    return np.round(img * 255).astype(np.uint8)


def scenes_dataset(n_images: int = 4096, image_size: int = 32, seed: int = 0) -> FactorDataset:
    """``n_images`` scenes (:func:`render_scenes`) with each factor drawn independently and uniformly (seeded)."""
    if n_images < 2:
        raise ValueError(f"scenes: n_images must be >= 2, got {n_images}")
    if image_size < 16 or image_size & (image_size - 1):
        raise ValueError(f"scenes: image_size must be a power of two >= 16, got {image_size}")
    rng = np.random.default_rng(seed)
    sizes = tuple(SCENE_FACTORS.values())
    factors = np.stack([rng.integers(0, k, size=n_images) for k in sizes], axis=1)
    images = np.concatenate([render_scenes(factors[i : i + 512], image_size) for i in range(0, n_images, 512)])
    return FactorDataset("scenes", images, factors, tuple(SCENE_FACTORS), sizes)


def procedural_dataset(
    n_images: int = 4096, image_size: int = 32, seed: int = 0, object_scale: float = 1.0
) -> FactorDataset:
    """``n_images`` procedural images with each factor drawn independently and uniformly (seeded);
    ``object_scale`` as in :func:`render_shapes`."""
    if n_images < 2:
        raise ValueError(f"procedural: n_images must be >= 2, got {n_images}")
    if image_size < 16 or image_size & (image_size - 1):
        raise ValueError(f"procedural: image_size must be a power of two >= 16, got {image_size}")
    rng = np.random.default_rng(seed)
    sizes = tuple(PROCEDURAL_FACTORS.values())
    factors = np.stack([rng.integers(0, k, size=n_images) for k in sizes], axis=1)
    images = np.concatenate(
        [render_shapes(factors[i : i + 512], image_size, object_scale=object_scale) for i in range(0, n_images, 512)]
    )
    return FactorDataset("procedural", images, factors, tuple(PROCEDURAL_FACTORS), sizes)


def load_dataset(name: str, options: DisentangleTrainOptions) -> FactorDataset:
    """The dataset ``name`` as ``options`` configure it (``disentangle.<name>``; a real dataset's
    seeded ``max_images`` subset drawn with ``data_seed``)."""
    d = options.dataset_settings(name)
    max_images, seed = options.max_images, options.data_seed
    if name == "procedural":
        return procedural_dataset(d["n_images"], d["image_size"], seed=d["seed"], object_scale=d["object_scale"])
    if name == "scenes":
        return scenes_dataset(d["n_images"], d["image_size"], seed=d["seed"])
    if name == "shapes3d":
        return load_shapes3d(d["path"], max_images, seed)
    if name == "mpi3d":
        return load_mpi3d(d["path"], d["factor_sizes"], max_images, seed)
    return load_image_folder(name, d["images_dir"], d["labels"], d["image_size"], max_images, seed)
