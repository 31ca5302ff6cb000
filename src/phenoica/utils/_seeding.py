"""One way to derive seeds: every random choice of phenoica takes ``config.seed`` plus stable keys.

``derive_seed(seed, "null_guide", 17)`` gives an independent seed for one purpose and item,
the same on every machine and in every process (strings are hashed with SHA-256, never with
Python's salted ``hash``), and unchanged when other items are added: pseudo-guide 17 is
the same whether 100 or 1,000 are drawn.

Two generators, two seedings: :func:`rng_for` seeds with that integer, :func:`rng_from_sequence`
(the demo simulator) with the ``SeedSequence`` it is drawn from.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

#: Seeds fit every consumer: numpy, torch and LightGBM (a signed 32-bit int) alike.
SEED_MAX = 2**31 - 1


def _words(seed: int, keys: tuple[str | int, ...]) -> list[int]:
    words = [int(seed)]
    for key in keys:
        if isinstance(key, (bool, np.bool_)):
            raise TypeError(f"derive_seed: key {key!r} is a bool; use a string or an integer")
        if isinstance(key, str):
            words.append(int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "little"))
        elif isinstance(key, (int, np.integer)) and int(key) >= 0:
            words.append(int(key))
        else:
            raise TypeError(f"derive_seed: key {key!r} must be a string or a non-negative integer")
    return words


def seed_sequence(seed: int, *keys: str | int) -> np.random.SeedSequence:
    """The numpy ``SeedSequence`` of the purpose named by ``keys``: what :func:`derive_seed`
    draws its integer from. A generator seeded with it directly (``default_rng(seed_sequence(...))``,
    as the demo simulator does) keeps the sequence's full entropy."""
    if int(seed) < 0:
        raise ValueError(f"derive_seed: seed must be >= 0, got {seed}")
    return np.random.SeedSequence(_words(seed, keys))


def derive_seed(seed: int, *keys: str | int) -> int:
    """An independent seed in ``[0, 2**31 - 1]`` for the purpose named by ``keys``."""
    return int(seed_sequence(seed, *keys).generate_state(1)[0]) & SEED_MAX


def rng_for(seed: int, *keys: str | int) -> np.random.Generator:
    """A numpy Generator for the purpose named by ``keys``, seeded with the integer
    :func:`derive_seed` gives (the classifiers, variants, alignment, gallery, scenarios)."""
    return np.random.default_rng(derive_seed(seed, *keys))


def rng_from_sequence(seed: int, *keys: str | int) -> np.random.Generator:
    """A numpy Generator for the purpose named by ``keys``, seeded with the keys'
    :func:`seed_sequence` itself (its full entropy, not one integer drawn from it): the demo
    simulator's generators, which have always been seeded so. Not the stream of :func:`rng_for`."""
    return np.random.default_rng(seed_sequence(seed, *keys))


def name_hashes(names: Sequence[str]) -> np.ndarray:
    """A 64-bit hash of each name (BLAKE2b, the same on every machine and in every process): the
    input of :func:`keyed_uniforms`, computed once for names drawn from many times."""
    digests = (int.from_bytes(hashlib.blake2b(str(n).encode(), digest_size=8).digest(), "little") for n in names)
    return np.fromiter(digests, dtype=np.uint64, count=len(names))


def keyed_uniforms(hashes: np.ndarray, seed: int, *keys: str | int) -> np.ndarray:
    """A number in ``[0, 1)`` per name (``hashes`` from :func:`name_hashes`) for the purpose named
    by ``seed`` and ``keys``, that depends on that name alone, not on the other names or their
    order: a draw that takes the names with the smallest numbers (a consistent sample) keeps
    every name it took when another name is removed, and replaces only a removed one. Each
    purpose mixes the names' hashes with its own :func:`derive_seed` through SplitMix64's
    finalizer, so two purposes draw independently."""
    with np.errstate(over="ignore"):
        z = np.asarray(hashes, dtype=np.uint64) ^ (np.uint64(derive_seed(seed, *keys)) * np.uint64(0x9E3779B97F4A7C15))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(2**53)
