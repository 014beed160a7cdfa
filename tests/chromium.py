"""How every browser test starts Debian's Chromium: Playwright cannot download browsers here, and without the
background-networking flags Chromium keeps dialling hosts this machine cannot reach."""

from playwright.sync_api import Browser, Playwright

CHROMIUM_PATH = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def launch_chromium(playwright: Playwright) -> Browser:
    return playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
