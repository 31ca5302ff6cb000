"""LightGBM's reading of the schema's ``classify.lightgbm`` defaults, shipped for the installed
LightGBM, is LightGBM's own: the door takes it instead of importing LightGBM."""

from __future__ import annotations

import json
import subprocess
import sys

from phenoica.classify import _lightgbm_params as params
from phenoica.contract import read_yaml, validate_config


def test_the_shipped_reading_is_lightgbms_own(tmp_path):
    """The shipped record for the installed version equals a fresh probe of LightGBM, and
    writing it again gives the same file."""
    shipped = read_yaml(params.SHIPPED_NAMES)
    version = params._lightgbm_version()
    assert version in shipped, f"no reading for LightGBM {version}: run python -m phenoica.classify._lightgbm_params"
    defaults = validate_config({})["classify"]["lightgbm"]
    probe = params._lightgbm_names(params._frozen(defaults))  # LightGBM itself, no record
    assert shipped[version]["params"] == params._frozen(defaults)
    assert [tuple(pair) for pair in shipped[version]["names"]] == list(probe)
    copy = tmp_path / "names.yaml"
    copy.write_text(params.SHIPPED_NAMES.read_text())
    params.write_shipped_names(copy)
    assert copy.read_text() == params.SHIPPED_NAMES.read_text()


def test_the_defaults_are_read_without_lightgbm_and_other_keys_with_it():
    """A fresh process builds the default config's LightGBM parameters without importing
    LightGBM, the same as LightGBM's reading gives; a key the schema does not default is read by
    LightGBM."""
    code = (
        "import json, sys\n"
        "from phenoica.classify import lightgbm_params\n"
        "from phenoica.contract import validate_config\n"
        "given = validate_config({})['classify']['lightgbm']\n"
        "default = lightgbm_params(given, 3)\n"
        "before = 'lightgbm' in sys.modules\n"
        "lightgbm_params({**given, 'min_data_in_leaf': 5}, 3)\n"
        "print(json.dumps([default, before, 'lightgbm' in sys.modules]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    default, before, after = json.loads(proc.stdout)
    assert not before and after
    names = dict(params._lightgbm_names(params._frozen(validate_config({})["classify"]["lightgbm"])))
    assert names["reg_alpha"] == "lambda_l1" and default["lambda_l1"] == 5.0 and "reg_alpha" not in default
