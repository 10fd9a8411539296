"""A real headless Chromium for portal tests, driven by Selenium over a local chromedriver.

Chromium and chromedriver come from the machine (Debian: ``chromium``, ``chromium-driver``).
Without them the browser tests skip with the reason shown, unless ``CI`` is set: there a
missing browser is a broken runner, so they fail.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,900")

DESKTOP = (1280, 900)
PHONE = (375, 812)


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {reason}: .ci/run must install the Debian packages "
                    "'chromium' and 'chromium-driver' and the 'selenium' Python package")
    pytest.skip(f"browser tests skipped: {reason}; install the Debian packages 'chromium' "
                "and 'chromium-driver' and 'pip install selenium' to run them")


def find_binaries() -> tuple[str, str]:
    """(chromium, chromedriver), or skip/fail saying what is missing."""
    browser = next((p for p in map(shutil.which, BROWSERS) if p), None)
    driver = shutil.which("chromedriver")
    missing = [name for name, path in (("chromium", browser), ("chromedriver", driver))
               if path is None]
    if missing:
        _unavailable(f"{' and '.join(missing)} not found on PATH")
    assert browser is not None and driver is not None
    return browser, driver


@contextmanager
def chromium() -> Iterator[Any]:
    """A fresh headless Chromium (its own profile directory), closed afterwards."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _unavailable("the 'selenium' package is not installed")
    browser, driver_path = find_binaries()
    profile = tempfile.mkdtemp(prefix="hookgate-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    try:
        driver.set_page_load_timeout(30)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def set_viewport(driver: Any, width: int, height: int) -> None:
    """Make the page's viewport exactly ``width`` CSS pixels, as on a phone of that width."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600,
    })


def console_errors(driver: Any) -> list[str]:
    """Messages the page logged at error level (uncaught exceptions, failed requests)."""
    return [entry["message"] for entry in driver.get_log("browser")
            if entry.get("level") == "SEVERE"]
