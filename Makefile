# mysql-cdc: make setup | make test | make demo | make airflow | make bench
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Debian packages the project needs: the MariaDB servers the tests and the demo start, the JDBC
# driver jar for Spark, the Java runtime spark-submit runs on, and the Chromium the browser tests
# drive through Playwright (never a browser Playwright downloads).
APT_PACKAGES := mariadb-server mariadb-client libmariadb-java openjdk-17-jre-headless chromium

# MySQL (sid's mysql-9.x, the line after 8.4) unpacked into .local/mysql: tests and the demo run
# capture and merge against it beside MariaDB (scripts/install_mysql.sh says how and why).
MYSQL_DIR := .local/mysql

# The compiled row decoder (native/: Rust through PyO3, built by maturin) needs cargo: rustup's
# ~/.cargo/bin is searched as well as PATH.
CARGO_PATH := $(HOME)/.cargo/bin:$(PATH)
NATIVE_SOURCES := native/Cargo.toml native/Cargo.lock native/pyproject.toml $(wildcard native/src/*.rs)

.PHONY: setup apt venv native mysql jars readers spark-line spark-cds test test-spark test-native test-capture bench bench-quick clean

setup: apt venv native mysql jars readers spark-cds

apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages: $$missing"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
	@# Debian's package may start a system mariadbd; the project starts its own on free ports.

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $@

native: $(VENV)/.native-installed

$(VENV)/.native-installed: $(VENV)/.installed $(NATIVE_SOURCES)
	@PATH="$(CARGO_PATH)" command -v cargo >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs) to build native/, the compiled row decoder"; exit 1; }
	PATH="$(CARGO_PATH)" $(PY) -m pip install -q ./native
	touch $@

# Spark lines: the merge job runs on Spark 4.0, 4.1 and 4.2 (docs/spark.md). The default line is
# the venv's pyspark (requirements.txt); its lake jars (Delta for Spark 4.2, Hadoop's S3A) are
# pinned in mk/spark-lines/4.2.txt, fetched from Maven Central (or $(MAVEN_REPO)) into
# .local/jars/spark-4.2, submitted with --jars, so no merge downloads anything at submit time.
# `make spark-line SPARK=4.1` fetches another line's jars and installs that line's pyspark as a
# Spark home of its own in .local/spark/4.1 (scripts/install_spark_line.sh); `make test-spark
# SPARK=4.1` runs the sink conformance suite, the Delta tests and real DAG runs on it.
DEFAULT_SPARK := 4.2
SPARK ?= $(DEFAULT_SPARK)
JARS_DIR := .local/jars
SPARK_LINES_DIR := .local/spark
# the lake readers users run (below), Spark's Iceberg runtimes among them
READERS_DIR := .local/readers

jars: $(JARS_DIR)/spark-$(DEFAULT_SPARK)/.installed

$(JARS_DIR)/spark-%/.installed: mk/spark-lines/%.txt scripts/fetch_jars.py
	$(PYTHON) scripts/fetch_jars.py $< $(@D)
	touch $@

$(SPARK_LINES_DIR)/%/.installed: mk/spark-lines/pyspark.txt scripts/install_spark_line.sh $(VENV)/.installed
	scripts/install_spark_line.sh $* $(SPARK_LINES_DIR)/$*
	touch $@

spark-line: $(JARS_DIR)/spark-$(SPARK)/.installed $(if $(filter $(SPARK),$(DEFAULT_SPARK)),,$(SPARK_LINES_DIR)/$(SPARK)/.installed) \
	$(if $(wildcard mk/readers/iceberg-spark-$(SPARK).txt),$(READERS_DIR)/iceberg-spark-$(SPARK)/.installed)

# Spark's Iceberg runtime of a line, as a user's Spark reads an Iceberg follower (mk/readers/iceberg-spark-<line>.txt)
$(READERS_DIR)/iceberg-spark-%/.installed: mk/readers/iceberg-spark-%.txt scripts/fetch_jars.py
	$(PYTHON) scripts/fetch_jars.py $< $(@D)
	touch $@

# The Spark driver JVM's class-data archive: Spark's classes parsed once, mapped by every merge's
# driver (packaging.driver_defaults): about half of a small merge's spark-submit CPU. Specific to
# this JDK and this pyspark, so made here, on the machine that runs the drivers.
CDS_ARCHIVE := .local/spark/driver.jsa

spark-cds: $(CDS_ARCHIVE)

$(CDS_ARCHIVE): $(VENV)/.installed scripts/spark_cds.py scripts/spark_cds_warmup.py | apt
	$(PY) scripts/spark_cds.py $@

# Lake readers users run that cannot share the venv (mk/readers/*.txt say why), each in a site
# directory of its own that the reader tests put on a separate Python process's path.

readers: $(READERS_DIR)/duckdb-delta/.installed $(READERS_DIR)/duckdb-iceberg/.installed \
	$(READERS_DIR)/hive-metastore/.installed $(READERS_DIR)/trino/.installed

# A Delta follower's catalog as the tests run it: Hive's metastore (pyspark's jars) on MariaDB through
# this JDBC driver, and Trino reading the tables by name through it (mk/readers/trino.txt says why)
$(READERS_DIR)/hive-metastore/.installed: mk/readers/hive-metastore.txt scripts/fetch_jars.py
	$(PYTHON) scripts/fetch_jars.py $< $(@D)
	touch $@

$(READERS_DIR)/trino/.installed: mk/readers/trino.txt scripts/install_trino.sh
	scripts/install_trino.sh $< $(@D)
	touch $@

$(READERS_DIR)/%/.installed: mk/readers/%.txt $(VENV)/.installed
	rm -rf $(@D)/site
	$(PY) -m pip install -q --target $(@D)/site -r $<
	touch $@

mysql: $(MYSQL_DIR)/.installed

$(MYSQL_DIR)/.installed: scripts/install_mysql.sh
	scripts/install_mysql.sh $(MYSQL_DIR)

# Two pytest-xdist workers (PYTEST_WORKERS=0 runs in one process). The suite is mostly CPU (JVMs
# starting, Spark plans, servers), so two workers on 2 cores gain less than half: measured from a
# fresh clone, 61 min in one process -> 51 min with two (the rest of the way to ~34 min came from the
# driver's class-data archive and delta-rs's appends). Each worker starts its own servers, Spark
# session and Airflow home; a whole file runs on one worker (long files first: tests/conftest.py).
PYTEST_WORKERS ?= 2

# setup's parts run side by side (the downloads, the pip install and the Rust build), then the tests
test:
	@$(MAKE) --no-print-directory -j4 setup
	@$(MAKE) --no-print-directory test-native
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile tests

# What proves a Spark line (SPARK=4.1): the sink conformance suite (every kind's merges, DDL,
# copies, types and crashes through that line's jobs), the Delta follower's Spark jobs the suite
# does not run (changelog appends, maintenance), a user's Spark reading the Iceberg follower, and a
# real DAG run into a Delta lake; with the line's pyspark in the test process (its in-process
# session) and its spark-submit in every job and in the Spark connection. The rest of the Delta
# follower's tests run on the default line.
DELTA_LINE_TESTS := $(addprefix tests/kinds/delta/test_merge_delta.py::,test_changelog_tables_keep_every_change_row_once \
	test_maintenance_compacts_and_vacuums_and_never_breaks_the_cut)
SPARK_LINE_TESTS := tests/test_spark_lines.py tests/kinds/test_sink_contract.py tests/kinds/iceberg/test_spark_reads.py \
	$(DELTA_LINE_TESTS) tests/airflow/dags/test_delta_runs.py::test_snapshot_then_stream_into_delta_through_dag_runs

test-spark: setup
	@$(MAKE) --no-print-directory spark-line SPARK=$(SPARK)
	$(if $(filter $(SPARK),$(DEFAULT_SPARK)),,PYTHONPATH=$(CURDIR)/$(SPARK_LINES_DIR)/$(SPARK)/site MYSQL_CDC_TEST_SPARK_HOME=$(CURDIR)/$(SPARK_LINES_DIR)/$(SPARK)) \
		$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(SPARK_LINE_TESTS)

# the compiled decoder's own unit tests (float and date arithmetic); the differential tests
# against the reference decoder are in tests/capture/test_native_decoder.py
test-native:
	cd native && PATH="$(CARGO_PATH)" cargo test --release --quiet

test-capture: setup
	$(PY) -m pytest tests/capture

# Benchmarks are never part of `make test`: they take ~30 minutes and measure, they do not assert.
bench: setup
	$(PY) bench/run_bench.py

bench-quick: setup
	$(PY) bench/run_bench.py --quick

clean:
	rm -rf .local build native/target

-include mk/airflow.mk
