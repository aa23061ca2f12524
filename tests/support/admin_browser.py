"""An admin change list as Debian's Chromium lays it out: whether it fits, with the side bar and the filters.

For the lists an operator reads first (mailboxes, attachments): a list wider than its place hides its last
columns behind a scroll bar. The user ``root`` (password ``pw-for-tests``, the factories') must exist.
"""

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu"]

_LAYOUT = """() => {
    const results = document.querySelector('#changelist .results');
    const sidebar = document.querySelector('#nav-sidebar');
    const headers = [...document.querySelectorAll('#result_list thead th')];
    return {overflow: results.scrollWidth - results.clientWidth,
            rows: document.querySelectorAll('#result_list tbody tr').length,
            sidebar: !!sidebar && getComputedStyle(sidebar).display !== 'none',
            filters: !!document.querySelector('#changelist-filter'),
            headers: headers.map(th => th.innerText.trim()),
            widths: Object.fromEntries(headers.map(th => [th.innerText.trim(),
                                                          Math.round(th.getBoundingClientRect().width)]))};
}"""


def change_list_layout(live_server, path: str, *, width: int = 1400, height: int = 900) -> dict:
    """Log in as root, open the change list at ``path`` in a ``width`` px window, and say how it is laid out:
    ``overflow`` (px wider than its place; <= 0 fits), ``rows``, ``sidebar``, ``filters``, ``headers`` and
    ``widths`` (header -> px)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(f"{live_server.url}/admin/login/?next={path}")
            page.fill("#id_username", "root")
            page.fill("#id_password", "pw-for-tests")
            page.click("input[type=submit]")
            page.wait_for_url(f"**{path}")
            return page.evaluate(_LAYOUT)
        finally:
            browser.close()
