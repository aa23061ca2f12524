#!/bin/sh
# Debian's Dovecot IMAP server for the mail intake tests (tests/mailpoll).
# Idempotent: nothing happens when `dovecot` is already installed. The tests
# start their own instance (tests/support/dovecot.py: own config, own port on
# 127.0.0.1, own temp dir); the system-wide service is never wanted, so it is
# kept from starting during the install and stopped/disabled afterwards.
set -eu

if command -v dovecot >/dev/null 2>&1 || [ -x /usr/sbin/dovecot ]; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install_dovecot.sh: dovecot is missing and this user cannot install it (not root, no sudo);" >&2
        echo "  install Debian's 'dovecot-imapd' package, or the IMAP tests will be skipped." >&2
        exit 1
    fi
fi

# Keep the package's postinst from starting a system dovecot on port 143. An
# existing policy-rc.d (Docker images ship one) is left alone; ours is removed.
POLICY=/usr/sbin/policy-rc.d
OWN_POLICY=""
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
    $SUDO chmod 755 "$POLICY"
    OWN_POLICY=1
fi
cleanup() {
    if [ -n "$OWN_POLICY" ]; then
        $SUDO rm -f "$POLICY"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when apt does not know the package yet.
if ! apt-cache show dovecot-imapd >/dev/null 2>&1; then
    $SUDO apt-get update -qq
fi
$SUDO apt-get install -y -qq --no-install-recommends dovecot-imapd >/dev/null

# Belt and braces: whatever init system there is, no system dovecot stays up or
# comes back at boot. Each may be absent or fail in a container; none matters.
$SUDO service dovecot stop >/dev/null 2>&1 || true
$SUDO systemctl disable --now dovecot >/dev/null 2>&1 || true
$SUDO update-rc.d dovecot disable >/dev/null 2>&1 || true

echo "install_dovecot.sh: installed dovecot $(dovecot --version 2>/dev/null || echo '?')"
