#!/usr/bin/env bash
# Trino's server, as a data team runs it, for the tests that read a Delta follower by name:
#
#     scripts/install_trino.sh mk/readers/trino.txt .local/readers/trino
#
# The tarball of the coordinate in the list (io.trino:trino-server:<version>) is fetched from Maven
# Central (or $MAVEN_REPO), checked against the repository's SHA-1 and unpacked; every plugin but
# the Delta Lake connector is removed (the tarball's plugins share jars through hard links, so the
# whole tarball is unpacked first).
set -euo pipefail
list="$1"
dir="$2"
repo="${MAVEN_REPO:-https://repo1.maven.org/maven2}"
coordinate="$(grep -v '^#' "$list" | awk 'NF {print $1; exit}')"
version="${coordinate##*:}"
url="$repo/io/trino/trino-server/$version/trino-server-$version.tar.gz"
rm -rf "$dir.partial"
mkdir -p "$dir.partial"
curl -fsS --retry 3 -o "$dir.partial/server.tar.gz" "$url"
expected="$(curl -fsS --retry 3 "$url.sha1" | awk '{print $1}')"
actual="$(sha1sum "$dir.partial/server.tar.gz" | awk '{print $1}')"
if [ "$expected" != "$actual" ]; then
    echo "$url: SHA-1 $actual differs from the repository's $expected; not installed" >&2
    exit 1
fi
tar xzf "$dir.partial/server.tar.gz" -C "$dir.partial" --strip-components=1
rm "$dir.partial/server.tar.gz"
find "$dir.partial/plugin" -mindepth 1 -maxdepth 1 ! -name delta-lake -exec rm -rf {} +
rm -rf "$dir"
mv "$dir.partial" "$dir"
echo "Trino $version in $dir (plugins: $(ls "$dir/plugin"))"
