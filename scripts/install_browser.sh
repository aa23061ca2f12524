#!/bin/sh
# Debian's chromium for the end-to-end browser test (tests/e2e). Idempotent:
# nothing happens when /usr/bin/chromium is already there. Playwright drives it
# through `executable_path`; `playwright install` is never run (its browser
# builds are downloads from outside the package registries).
set -eu

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
    exit 0
fi

. "$(dirname "$0")/apt_lib.sh"
apt_sudo install_browser.sh "$CHROMIUM" "install Debian's 'chromium' package, or the e2e test will be skipped."
apt_install chromium
echo "install_browser.sh: installed $($CHROMIUM --version 2>/dev/null || echo chromium)"
