# Sourced by the install_*.sh scripts: installing one of Debian's packages the tests or a
# benchmark need, as root or through sudo, with no service of it left running.

# apt_sudo SCRIPT WHAT HINT: SUDO is "" for root and "sudo" where sudo exists; otherwise
# SCRIPT says WHAT is missing and HINT, and the script exits 1.
apt_sudo() {
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            SUDO="sudo"
        else
            echo "$1: $2 is missing and this user cannot install it (not root, no sudo);" >&2
            echo "  $3" >&2
            exit 1
        fi
    fi
}

# apt_no_services: the packages' postinst may not start a service (policy-rc.d) until the
# script exits. An existing policy-rc.d (Docker images ship one) is left alone; ours is removed.
apt_no_services() {
    POLICY=/usr/sbin/policy-rc.d
    OWN_POLICY=""
    if [ ! -e "$POLICY" ]; then
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
        $SUDO chmod 755 "$POLICY"
        OWN_POLICY=1
    fi
    trap apt_remove_policy EXIT
    trap 'exit 130' INT TERM
}

apt_remove_policy() {
    if [ -n "$OWN_POLICY" ]; then
        $SUDO rm -f "$POLICY"
    fi
}

# apt_install PACKAGE: without recommends; the package lists are refreshed only when apt
# does not know the package yet.
apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-cache show "$1" >/dev/null 2>&1; then
        $SUDO apt-get update -qq
    fi
    $SUDO apt-get install -y -qq --no-install-recommends "$1" >/dev/null
}
