#!/bin/sh
# Debian's PostgreSQL 15 server binaries, for `make bench-profile` only: the embedded
# server (pgserver) ships no contrib modules, and the profile needs pg_stat_statements.
# Idempotent: nothing happens when the binaries and the module are there. The profile
# runs its own throw-away cluster (bench/own_postgres.py: its own directory, a Unix
# socket, no TCP); no system cluster is wanted, so none is created, and the package's
# postinst is kept from starting one.
set -eu

VERSION=15
BIN=/usr/lib/postgresql/$VERSION/bin/postgres
MODULE=/usr/lib/postgresql/$VERSION/lib/pg_stat_statements.so
if [ -x "$BIN" ] && [ -e "$MODULE" ]; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install_postgres_profiling.sh: postgresql-$VERSION is missing and this user cannot install it" >&2
        echo "  (not root, no sudo); install Debian's 'postgresql-$VERSION' package to run the profile." >&2
        exit 1
    fi
fi

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

# No "main" cluster: postgresql-common reads this before the package's postinst runs.
$SUDO mkdir -p /etc/postgresql-common/createcluster.d
printf 'create_main_cluster = false\n' | $SUDO tee /etc/postgresql-common/createcluster.d/seoinsight-no-main.conf >/dev/null

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show postgresql-$VERSION >/dev/null 2>&1; then
    $SUDO apt-get update -qq
fi
$SUDO apt-get install -y -qq --no-install-recommends postgresql-$VERSION >/dev/null

echo "install_postgres_profiling.sh: installed $($BIN --version)"
