#!/usr/bin/env bash
# Trino's server, as a data team runs it, for the tests that read the lake followers by name:
#
#     scripts/install_trino.sh mk/readers/trino.txt .local/readers/trino
#
# The list's first coordinate is io.trino:trino-server:<version>: its tarball is fetched from Maven
# Central (or $MAVEN_REPO), checked against the repository's SHA-1 and unpacked; every plugin but
# delta-lake and iceberg is removed (the tarball's plugins share jars through hard links, so the
# whole tarball is unpacked first). The other coordinates are jars put into plugin/iceberg (the
# JDBC driver of Iceberg's JDBC catalog).
set -euo pipefail
list="$1"
dir="$2"
repo="${MAVEN_REPO:-https://repo1.maven.org/maven2}"

fetch() {  # url file: the file, checked against the repository's SHA-1
    curl -fsS --retry 3 -o "$2" "$1"
    local expected actual
    expected="$(curl -fsS --retry 3 "$1.sha1" | awk '{print $1}')"
    actual="$(sha1sum "$2" | awk '{print $1}')"
    if [ "$expected" != "$actual" ]; then
        echo "$1: SHA-1 $actual differs from the repository's $expected; not installed" >&2
        exit 1
    fi
}

mapfile -t coordinates < <(grep -v '^#' "$list" | awk 'NF {print $1}')
server="${coordinates[0]}"
version="${server##*:}"
rm -rf "$dir.partial"
mkdir -p "$dir.partial"
fetch "$repo/io/trino/trino-server/$version/trino-server-$version.tar.gz" "$dir.partial/server.tar.gz"
tar xzf "$dir.partial/server.tar.gz" -C "$dir.partial" --strip-components=1
rm "$dir.partial/server.tar.gz"
find "$dir.partial/plugin" -mindepth 1 -maxdepth 1 ! -name delta-lake ! -name iceberg -exec rm -rf {} +
for coordinate in "${coordinates[@]:1}"; do
    IFS=: read -r group artifact jar_version <<< "$coordinate"
    fetch "$repo/${group//.//}/$artifact/$jar_version/$artifact-$jar_version.jar" \
        "$dir.partial/plugin/iceberg/$artifact-$jar_version.jar"
done
rm -rf "$dir"
mv "$dir.partial" "$dir"
echo "Trino $version in $dir (plugins: $(ls "$dir/plugin" | tr '\n' ' '))"
