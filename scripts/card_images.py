"""Regenerate the pictures of the Microsoft Teams approval cards on docs/channels/teams.md.

One sample request is rendered with the functions the Teams channel sends its cards with;
the Adaptive Card JSON is written to docs/channels/img/*.json (tests/docs/test_card_images.py
checks it still matches) and drawn to a PNG beside it by Microsoft's own renderer, the
``adaptivecards`` npm package (pinned below, installed into .cache/ by install_npm_cli.sh),
in the headless Chromium the portal tests use:

    python scripts/card_images.py
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hookgate.channels.base import ApprovalCard, CardOutcome
from hookgate.channels.masking import DEFAULT_SECRET_PATTERNS
from hookgate.channels.teams.cards import approval_card, decided_card

REPO = Path(__file__).resolve().parent.parent
IMAGES = REPO / "docs" / "channels" / "img"
#: Microsoft's Adaptive Cards renderer for the web, pinned.
ADAPTIVECARDS = ("adaptivecards", "3.0.6")
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: About the width Teams gives a card in a channel.
CARD_WIDTH_PX = 520

NOW = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
REQUEST_ID = "cr_7d1c0f5e2a9b48c3a6e1f0d2"
SAMPLE = ApprovalCard(
    request_id=REQUEST_ID, tool_name="wire_transfer",
    args={"amount": 60000, "currency": "EUR", "vendor": "ACME GMBH",
          "iban": "DE89370400440532013000", "api_token": "********"},
    agent_id="buyer", agent_name="Buyer", requester="bob",
    expires_at=NOW + timedelta(minutes=14, seconds=30),
    inbox_url=f"https://gate.example.com/inbox/{REQUEST_ID}", org_id="acme",
    context={"user_message": "Pay ACME's March invoice",
             "tool_description": "Sends a bank transfer"},
    reasons=("amounts over 50,000 need a person",), numbers="amount = 60,000",
    editable=True)
APPROVED = CardOutcome(request_id=REQUEST_ID, status="approved", decided_by="alice",
                       decided_at=NOW + timedelta(minutes=3), via="teams")


def cards() -> dict[str, dict[str, Any]]:
    """Each picture's name and the Adaptive Card it shows, as the Teams channel sends it."""
    return {
        "teams-approval": approval_card(SAMPLE, now=NOW, patterns=DEFAULT_SECRET_PATTERNS),
        "teams-approved": decided_card(APPROVED, SAMPLE.tool_name,
                                       patterns=DEFAULT_SECRET_PATTERNS),
    }


PAGE = """<!doctype html><html><head><meta charset="utf-8">
<style>
  body { margin: 0; background: #f5f5f5; font-family: "Segoe UI", "DejaVu Sans", sans-serif; }
  #card { width: %(width)dpx; margin: 12px; background: #fff; border-radius: 6px;
          box-shadow: 0 1px 3px rgba(0,0,0,.25); overflow: hidden; }
  /* Buttons roughly as Teams draws them (the renderer leaves their look to the host). */
  .ac-pushButton { font: inherit; font-size: 13px; font-weight: 600; padding: 5px 12px;
                   border: 1px solid #d1d1d1; border-radius: 4px; background: #fff;
                   color: #242424; white-space: nowrap; overflow: hidden;
                   text-overflow: ellipsis; }
  .ac-pushButton.style-positive, .ac-pushButton.style-destructive {
      flex-shrink: 0 !important; }
  .ac-pushButton.style-positive { background: #5b5fc7; border-color: #5b5fc7; color: #fff; }
  .ac-pushButton.style-destructive { color: #c4314b; }
</style>
<script src="%(script)s"></script></head><body><div id="card"></div>
<script>
  const card = new AdaptiveCards.AdaptiveCard();
  card.hostConfig = new AdaptiveCards.HostConfig({
    fontFamily: '"Segoe UI", "DejaVu Sans", sans-serif',
    spacing: {small: 4, default: 8, medium: 16, large: 24, extraLarge: 32, padding: 16},
    actions: {maxActions: 5, buttonSpacing: 8, actionsOrientation: "horizontal",
              actionAlignment: "left", showCard: {actionMode: "inline"}}
  });
  card.parse(%(card)s);
  document.getElementById("card").appendChild(card.render());
  document.title = "rendered";
</script></body></html>
"""


def renderer() -> Path:
    """The pinned adaptivecards bundle, installed into .cache/ on first use."""
    package, version = ADAPTIVECARDS
    installed = subprocess.run(
        ["bash", str(REPO / "scripts" / "install_npm_cli.sh"), package, version, package,
         f"node_modules/{package}/dist/adaptivecards.min.js"],
        check=True, capture_output=True, text=True)
    return Path(installed.stdout.strip())


def draw(cards_by_name: dict[str, dict[str, Any]], out: Path) -> None:
    """Each card to ``out/<name>.png``, rendered by adaptivecards in headless Chromium."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    script = renderer().as_uri()
    browser = next((p for p in map(shutil.which, BROWSERS) if p), None)
    driver_path = shutil.which("chromedriver")
    if browser is None or driver_path is None:
        raise SystemExit("card_images: needs chromium and chromedriver on PATH (Debian: "
                         "'chromium' and 'chromium-driver')")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-dev-shm-usage",
                 "--hide-scrollbars", "--force-device-scale-factor=2",
                 "--window-size=600,1400"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    try:
        with tempfile.TemporaryDirectory() as folder:
            for name, card in cards_by_name.items():
                page = Path(folder) / f"{name}.html"
                page.write_text(PAGE % {"width": CARD_WIDTH_PX, "script": script,
                                        "card": json.dumps(card)}, encoding="utf-8")
                driver.get(page.as_uri())
                WebDriverWait(driver, 20).until(lambda d: d.title == "rendered")
                shown = driver.find_element(By.ID, "card")
                (out / f"{name}.png").write_bytes(shown.screenshot_as_png)
    finally:
        driver.quit()


def main() -> int:
    IMAGES.mkdir(parents=True, exist_ok=True)
    rendered = cards()
    for name, card in rendered.items():
        (IMAGES / f"{name}.json").write_text(json.dumps(card, indent=2, ensure_ascii=False)
                                             + "\n", encoding="utf-8")
    draw(rendered, IMAGES)
    for name in rendered:
        print(IMAGES / f"{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
