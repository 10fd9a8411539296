"""A real headless Chromium for portal tests, driven by Selenium over a local chromedriver.

Chromium and chromedriver come from the machine (Debian: ``chromium``, ``chromium-driver``).
Without them the browser tests skip with the reason shown, unless ``CI`` is set: there a
missing browser is a broken runner, so they fail.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import urlsplit

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


@dataclass
class _Browser:
    driver: Any
    profile: str


#: The test process's one Chromium, started on first use: a start costs seconds, and each
#: use gets it in the state of a fresh one (see ``chromium``).
_SHARED: list[_Browser] = []


def _start() -> _Browser:
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
    driver.set_page_load_timeout(30)
    return _Browser(driver, profile)


def _quit(browser: _Browser) -> None:
    with contextlib.suppress(Exception):
        browser.driver.quit()
    shutil.rmtree(browser.profile, ignore_errors=True)


def _quit_shared() -> None:
    while _SHARED:
        _quit(_SHARED.pop())


atexit.register(_quit_shared)


def _as_new(driver: Any) -> None:
    """Undo what a use can leave behind: the emulated viewport, blocked URLs, the console
    log not read yet; on a blank page."""
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
    driver.execute_cdp_cmd("Network.disable", {})
    driver.get("about:blank")
    driver.get_log("browser")


def _leave(driver: Any) -> None:
    """Clear the storage of the origin the use ended on (a later server may get the same
    port, so the same origin) and leave its page, closing its live streams."""
    parts = urlsplit(driver.current_url)
    if parts.scheme in ("http", "https"):
        driver.execute_cdp_cmd("Storage.clearDataForOrigin", {
            "origin": f"{parts.scheme}://{parts.netloc}", "storageTypes": "all"})
    driver.get("about:blank")


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium as fresh as a new one: the process's one browser (its own profile
    directory), its page blank, its viewport, blocked URLs and console log reset, and the
    storage of the origin the last use ended on cleared. A use that fails quits it (the
    next use starts another), so no failure's state reaches another test."""
    browser = _SHARED.pop() if _SHARED else None
    if browser is not None:
        try:
            _as_new(browser.driver)
        except Exception:  # gone since its last use: start another
            _quit(browser)
            browser = None
    if browser is None:
        browser = _start()
    try:
        yield browser.driver
        _leave(browser.driver)
    except BaseException:
        _quit(browser)
        raise
    _SHARED.append(browser)


def set_viewport(driver: Any, width: int, height: int) -> None:
    """Make the page's viewport exactly ``width`` CSS pixels, as on a phone of that width."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600,
    })


def console_errors(driver: Any) -> list[str]:
    """Messages the page logged at error level (uncaught exceptions, failed requests)."""
    return [entry["message"] for entry in driver.get_log("browser")
            if entry.get("level") == "SEVERE"]
