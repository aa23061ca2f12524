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

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install_browser.sh: $CHROMIUM is missing and this user cannot install it (not root, no sudo);" >&2
        echo "  install Debian's 'chromium' package, or the e2e test will be skipped." >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when apt does not know the package yet.
if ! apt-cache show chromium >/dev/null 2>&1; then
    $SUDO apt-get update -qq
fi
$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
echo "install_browser.sh: installed $($CHROMIUM --version 2>/dev/null || echo chromium)"
