"""Regenerate the pictures of the Slack approval messages on docs/channels/slack.md.

The sample request of scripts/card_images.py is rendered with the functions the Slack
channel sends its messages with; the Block Kit JSON is written to docs/channels/img/*.json
(tests/docs/test_slack_card_images.py checks it still matches) and drawn to a PNG beside it
by ``slack-blocks-to-jsx`` (a React renderer of Block Kit, pinned below with React and
installed into .cache/ from the npm registry), rendered to HTML by Node and photographed in
the headless Chromium the portal tests use:

    python scripts/slack_card_images.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import card_images  # the sample request and decision the Teams pictures show

from hookgate.channels.masking import DEFAULT_SECRET_PATTERNS
from hookgate.channels.slack.blocks import approval_blocks, decided_blocks

REPO = Path(__file__).resolve().parent.parent
IMAGES = REPO / "docs" / "channels" / "img"
#: The Block Kit renderer and the React it runs on, pinned.
PACKAGES = ("slack-blocks-to-jsx@1.1.1", "react@18.3.1", "react-dom@18.3.1")
PREFIX = REPO / ".cache" / "slack-blocks-to-jsx"
#: About the width Slack gives a message in a channel.
MESSAGE_WIDTH_PX = 560

#: The app's icon beside the name: a plain square (the renderer wants an image).
LOGO = "data:image/svg+xml," + quote(
    '<svg xmlns="http://www.w3.org/2000/svg" width="36" height="36">'
    '<rect width="36" height="36" rx="6" fill="#4a154b"/></svg>')
#: The sample decision, made in Slack.
APPROVED = replace(card_images.APPROVED, via="slack")

#: Node: the message's HTML from {"blocks", "name", "time"} on stdin (server-side React).
RENDER = """\
import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { Message } from "slack-blocks-to-jsx";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const { blocks, name, logo, time } = JSON.parse(input);
process.stdout.write(renderToStaticMarkup(createElement(Message, {
  blocks, name, logo, time: new Date(time), theme: "light" })));
"""

PAGE = """<!doctype html><html><head><meta charset="utf-8">
<link rel="stylesheet" href="%(style)s">
<style>
  body { margin: 0; background: #fff; font-family: "Lato", "DejaVu Sans", sans-serif; }
  #message { width: %(width)dpx; padding: 12px 16px; }
</style></head><body><div id="message">%(html)s</div></body></html>
"""


def messages() -> dict[str, list[dict[str, Any]]]:
    """Each picture's name and the blocks it shows, as the Slack channel sends them."""
    sample = card_images.SAMPLE
    return {
        "slack-approval": approval_blocks(sample, now=card_images.NOW,
                                          patterns=DEFAULT_SECRET_PATTERNS),
        "slack-approved": decided_blocks(APPROVED, sample.tool_name,
                                         patterns=DEFAULT_SECRET_PATTERNS),
    }


def renderer() -> Path:
    """The folder of the pinned renderer, installed into .cache/ on first use."""
    stamp = PREFIX / (".installed-" + "-".join(p.replace("/", "_") for p in PACKAGES))
    script = PREFIX / "render.mjs"
    if not stamp.exists():
        PREFIX.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--prefix", str(PREFIX), "--no-audit", "--no-fund",
                        "--loglevel=error", *PACKAGES], check=True)
        stamp.touch()
    script.write_text(RENDER, encoding="utf-8")
    return PREFIX


def html(folder: Path, blocks: list[dict[str, Any]]) -> str:
    """The message as slack-blocks-to-jsx renders it (posted by the app "hookgate" at the
    sample's time, in UTC)."""
    done = subprocess.run(
        ["node", str(folder / "render.mjs")], cwd=folder, check=True, capture_output=True,
        text=True, env={**os.environ, "TZ": "UTC"},
        input=json.dumps({"blocks": blocks, "name": "hookgate", "logo": LOGO,
                          "time": card_images.NOW.isoformat()}))
    return done.stdout


def draw(by_name: dict[str, list[dict[str, Any]]], out: Path) -> None:
    """Each message to ``out/<name>.png``, photographed in headless Chromium."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    folder = renderer()
    style = (folder / "node_modules" / "slack-blocks-to-jsx" / "dist" / "style.css").as_uri()
    browser = next((p for p in map(shutil.which, card_images.BROWSERS) if p), None)
    driver_path = shutil.which("chromedriver")
    if browser is None or driver_path is None:
        raise SystemExit("slack_card_images: needs chromium and chromedriver on PATH "
                         "(Debian: 'chromium' and 'chromium-driver')")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-dev-shm-usage",
                 "--hide-scrollbars", "--force-device-scale-factor=2",
                 "--window-size=640,1400"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    try:
        with tempfile.TemporaryDirectory() as pages:
            for name, blocks in by_name.items():
                page = Path(pages) / f"{name}.html"
                page.write_text(PAGE % {"style": style, "width": MESSAGE_WIDTH_PX,
                                        "html": html(folder, blocks)}, encoding="utf-8")
                driver.get(page.as_uri())
                shown = driver.find_element(By.ID, "message")
                (out / f"{name}.png").write_bytes(shown.screenshot_as_png)
    finally:
        driver.quit()


def main() -> int:
    IMAGES.mkdir(parents=True, exist_ok=True)
    rendered = messages()
    for name, blocks in rendered.items():
        (IMAGES / f"{name}.json").write_text(json.dumps(blocks, indent=2, ensure_ascii=False)
                                             + "\n", encoding="utf-8")
    draw(rendered, IMAGES)
    for name in rendered:
        print(IMAGES / f"{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
