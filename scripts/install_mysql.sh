#!/usr/bin/env bash
# Unpack a real MySQL server (and client) into a project-local folder, for tests and the demo.
#
#   scripts/install_mysql.sh [DEST]      (default: .local/mysql; idempotent)
#
# Why this dance: no Debian suite carries MySQL 8.0 or 8.4, but sid carries the mysql-9.x line
# (the one after 8.4, with the same dialect: SHOW BINARY LOG STATUS, caching_sha2_password only,
# GTIDs on by default). Its binaries need sid's glibc (2.38+), newer than bookworm's. So:
#   1. a PRIVATE apt configuration (own sources list, lists, cache, status file) that points at
#      sid: the system's /etc/apt is never read or changed;
#   2. package names are resolved from sid at run time (sid moves on: mysql-server-core is the
#      current line's binaries, whatever its version), with their runtime-library closure;
#   3. `apt-get download` + `dpkg -x` into DEST/root: nothing is installed system-wide;
#   4. DEST/bin/mysqld (and mysql, mysqlbinlog) are wrappers that start the binary through sid's
#      own loader with sid's libraries: `ld-linux-x86-64.so.2 --library-path ... mysqld`.
# scripts/local_services.py starts the server from DEST (MySQLServer).
set -euo pipefail

DEST=$(realpath -m "${1:-$(dirname "$0")/../.local/mysql}")
SUITE=${MYSQL_APT_SUITE:-sid}
MIRROR=${MYSQL_APT_MIRROR:-http://deb.debian.org/debian}
STAMP="$DEST/.installed"

if [ -f "$STAMP" ] && [ -x "$DEST/bin/mysqld" ] && "$DEST/bin/mysqld" --version >/dev/null 2>&1; then
    exit 0
fi

APT="$DEST/apt"
rm -rf "$DEST/root" "$DEST/bin" "$APT"
mkdir -p "$APT"/{lists/partial,cache/archives/partial,sources.list.d,preferences.d,debs} "$DEST/root" "$DEST/bin"
echo "deb $MIRROR $SUITE main" > "$APT/sources.list"
: > "$APT/status"
cat > "$APT/apt.conf" <<EOF
Dir::Etc::SourceList "$APT/sources.list";
Dir::Etc::SourceParts "$APT/sources.list.d";
Dir::Etc::Preferences "$APT/preferences";
Dir::Etc::PreferencesParts "$APT/preferences.d";
Dir::State::Lists "$APT/lists";
Dir::State::status "$APT/status";
Dir::Cache "$APT/cache";
APT::Architecture "amd64";
APT::Get::AllowUnauthenticated "false";
EOF
export APT_CONFIG="$APT/apt.conf"

echo "mysql: reading the $SUITE package lists (private apt configuration in $APT)"
# The system's keyring verifies sid's Release file (Debian signs every suite with the same keys).
apt-get -q -o Dir::Etc::Trusted=/etc/apt/trusted.gpg -o Dir::Etc::TrustedParts=/etc/apt/trusted.gpg.d \
    update >"$APT/update.log" 2>&1 || { cat "$APT/update.log"; exit 1; }

# The server and client binaries and the closure of their runtime libraries. Perl and what only
# Perl needs are left out: they serve the packages' maintainer scripts, never mysqld.
packages=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances --no-pre-depends mysql-server-core mysql-client-core 2>/dev/null \
    | grep -v '^ ' | grep -v '^<' | sort -u \
    | grep -Ev '^(perl|perl-base|perl-modules-.*|libperl.*|libgdbm.*|libdb5.*|debconf.*)$')
version=$(apt-cache show mysql-server-core | awk '/^Version:/ && !v {v=$2} END {print v}')
echo "mysql: downloading mysql-server-core $version and $(echo "$packages" | wc -l) packages from $SUITE"
(cd "$APT/debs" && apt-get -q -o Dir::Etc::Trusted=/etc/apt/trusted.gpg \
    -o Dir::Etc::TrustedParts=/etc/apt/trusted.gpg.d download $packages >"$APT/download.log" 2>&1) \
    || { cat "$APT/download.log"; exit 1; }
for deb in "$APT"/debs/*.deb; do
    dpkg-deb -x "$deb" "$DEST/root"
done

ROOT="$DEST/root"
LOADER="$ROOT/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
[ -x "$LOADER" ] || LOADER="$ROOT/lib64/ld-linux-x86-64.so.2"
LIBS="$ROOT/usr/lib/x86_64-linux-gnu:$ROOT/lib/x86_64-linux-gnu"
for tool in usr/sbin/mysqld usr/bin/mysql usr/bin/mysqlbinlog usr/bin/mysqladmin; do
    name=$(basename "$tool")
    [ -x "$ROOT/$tool" ] || continue
    cat > "$DEST/bin/$name" <<EOF
#!/bin/sh
# $name from $SUITE's mysql-server-core $version, through $SUITE's own loader and libraries.
exec "$LOADER" --library-path "$LIBS" "$ROOT/$tool" "\$@"
EOF
    chmod +x "$DEST/bin/$name"
done
"$DEST/bin/mysqld" --version
echo "$version" > "$STAMP"
rm -rf "$APT/debs"
