"""Headless Chromium for page tests: Debian's ``chromium`` and ``chromium-driver`` (installed by
.ci/run), driven by selenium through an explicit driver path, so nothing is downloaded."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-unsafe-swiftshader",  # software WebGL for plotly's gl traces, with --disable-gpu
    "--window-size=1400,1000",
    "--force-device-scale-factor=1",
)


def require_browser() -> None:
    """Skip where Chromium is not installed, except on CI (.ci/run installs it): fail there."""
    if Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists():
        return
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} / {CHROMEDRIVER} missing on CI: .ci/run installs chromium and chromium-driver")
    pytest.skip("chromium and chromium-driver are not installed (apt-get install -y chromium chromium-driver)")


@contextmanager
def chromium() -> Iterator["object"]:
    """A headless Chromium session with a fresh profile and the browser console log captured."""
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="phenoica-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def console_errors(driver: "object") -> list[str]:
    """The browser console's messages of level SEVERE (errors) since the last call."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]  # type: ignore[attr-defined]
