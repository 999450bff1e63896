#!/usr/bin/env bash
# A Spark line other than the venv's own, as a Spark home of its own (`make spark-line SPARK=<line>`):
#
#     scripts/install_spark_line.sh 4.1 .local/spark/4.1
#
# pyspark of the line (pinned in mk/spark-lines/pyspark.txt) is installed with pip into <dir>/site,
# beside, not into, the venv; <dir>/jars is its Spark's jars and <dir>/bin/spark-submit its
# launcher, which puts the line's pyspark ahead of the venv's on the PYTHONPATH the driver and
# its Python workers inherit. So <dir> looks like a Spark distribution: a Spark connection's
# `spark-binary` names <dir>/bin/spark-submit, and the merge task reads the line from <dir>/jars.
set -euo pipefail
line="$1"
dir="$2"
here="$(cd "$(dirname "$0")/.." && pwd)"
pin="$(awk -v line="$line" '$1 == line {print $2}' "$here/mk/spark-lines/pyspark.txt")"
if [ -z "$pin" ]; then
    echo "no pyspark pinned for Spark $line in mk/spark-lines/pyspark.txt (lines: $(awk '!/^#/ && NF {printf "%s ", $1}' "$here/mk/spark-lines/pyspark.txt"))" >&2
    exit 2
fi
rm -rf "$dir.partial"
mkdir -p "$dir.partial"
# --no-deps: py4j and everything else the job imports come from the venv (pyspark 4.x shares py4j 0.10.9.9)
"$here/.venv/bin/python" -m pip install -q --no-deps --target "$dir.partial/site" "$pin"
ln -s site/pyspark/jars "$dir.partial/jars"
mkdir -p "$dir.partial/bin"
cat > "$dir.partial/bin/spark-submit" <<'LAUNCHER'
#!/bin/sh
# spark-submit of this Spark line (scripts/install_spark_line.sh): its own pyspark ahead of the venv's
home="$(cd "$(dirname "$0")/.." && pwd)"
export SPARK_HOME="$home/site/pyspark"
export PYTHONPATH="$home/site${PYTHONPATH:+:$PYTHONPATH}"
exec "$SPARK_HOME/bin/spark-submit" "$@"
LAUNCHER
chmod +x "$dir.partial/bin/spark-submit" "$dir.partial/site/pyspark/bin/"*
rm -rf "$dir"
mv "$dir.partial" "$dir"
echo "Spark $line ($pin) in $dir: spark-binary $dir/bin/spark-submit"
