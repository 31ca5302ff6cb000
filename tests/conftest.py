"""Shared fixtures: small real-shaped data the project generates itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _few_threads():
    """Tests run beside each other on small CI machines: keep torch to one thread."""
    torch.set_num_threads(1)
    yield


def make_metadata(
    n_plates: int = 2, wells: int = 4, sites: int = 2, batch_of=lambda p: f"B{p // 2 + 1}"
) -> pd.DataFrame:
    """A valid metadata table: plates x wells x sites, half the wells controls."""
    rows = []
    for p in range(n_plates):
        i = 0
        for w in range(wells):
            ctrl = w % 2 == 0
            for s in range(sites):
                rows.append(
                    {
                        "Metadata_Batch": batch_of(p),
                        "Metadata_Plate": f"P{p + 1}",
                        "Metadata_Well": f"A{w + 1:02d}",
                        "Metadata_Site": s,
                        "Metadata_Gene": "non-targeting" if ctrl else f"G{w}",
                        "Metadata_Guide": "NTC" if ctrl else f"G{w}_g1",
                        "Metadata_PertType": "control" if ctrl else "perturbation",
                        "Metadata_ImageIndex": i,
                        "Metadata_Extra": f"x{p}{w}{s}",
                    }
                )
                i += 1
    return pd.DataFrame(rows)


@pytest.fixture
def metadata() -> pd.DataFrame:
    return make_metadata()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


#: Test files whose slow tests run a whole demo or a cluster (the longest of the suite): they are
#: handed to the xdist workers first, so the suite's wall time is the longest file's, not the sum
#: of it and whatever a worker was given before it (`--dist loadfile` keeps collection order, once
#: pytest_configure below has turned off xdist's reordering of files by their number of tests).
#: Order: xdist gives the first file to one worker, the second to the other, and the third to the first
#: again at once (test_demo_truth.py holds one test, below xdist's two-pending-tests watermark), so
#: the two longest files start on different workers (a loaded run: demo 1883 s, workflow 1819 s).
LONG_FILES: tuple[str, ...] = ("test_demo_truth.py", "test_workflow.py", "test_studies_workflow.py", "test_slurm.py")


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist (3.x) hands out `--dist loadfile` files in order of their number of tests unless
    # told otherwise: the longest files, which hold few tests, would start last and run alone.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))  # stable: the rest keep their order
