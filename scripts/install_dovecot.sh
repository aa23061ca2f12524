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

. "$(dirname "$0")/apt_lib.sh"
apt_sudo install_dovecot.sh dovecot "install Debian's 'dovecot-imapd' package, or the IMAP tests will be skipped."
apt_no_services  # no system dovecot on port 143
apt_install dovecot-imapd

# Belt and braces: whatever init system there is, no system dovecot stays up or
# comes back at boot. Each may be absent or fail in a container; none matters.
$SUDO service dovecot stop >/dev/null 2>&1 || true
$SUDO systemctl disable --now dovecot >/dev/null 2>&1 || true
$SUDO update-rc.d dovecot disable >/dev/null 2>&1 || true

echo "install_dovecot.sh: installed dovecot $(dovecot --version 2>/dev/null || echo '?')"
