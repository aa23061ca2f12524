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

. "$(dirname "$0")/apt_lib.sh"
apt_sudo install_postgres_profiling.sh "postgresql-$VERSION" \
    "install Debian's 'postgresql-$VERSION' package to run the profile."
apt_no_services

# No "main" cluster: postgresql-common reads this before the package's postinst runs.
$SUDO mkdir -p /etc/postgresql-common/createcluster.d
printf 'create_main_cluster = false\n' | $SUDO tee /etc/postgresql-common/createcluster.d/seoinsight-no-main.conf >/dev/null

apt_install "postgresql-$VERSION"

echo "install_postgres_profiling.sh: installed $($BIN --version)"
