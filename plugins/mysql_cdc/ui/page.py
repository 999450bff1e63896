"""The CDC pipelines page as HTML: pure functions of the figures (no I/O), so a test renders them
from inline values. No JavaScript framework and no assets: the chart is inline SVG."""

from __future__ import annotations

import datetime as dt
import json
from html import escape
from typing import Sequence
from urllib.parse import quote

from ..text import plural
from ..contracts import POSITION_PATTERN
from ..contracts.history import BatchRecord
from ..monitor.verify import VerificationResult
from .data import PipelineView

STYLE = """
body{font-family:system-ui,sans-serif;margin:0;padding:1.5rem 2rem;color:#1f2933;background:#f7f9fb}
h1{font-size:1.5rem;margin:0 0 1rem} h2{font-size:1.2rem;margin:0} h3{font-size:1rem;margin:1.2rem 0 .4rem}
section.pipeline{background:#fff;border:1px solid #d9e2ec;border-radius:8px;padding:1rem 1.2rem;margin-bottom:1.5rem}
.figures{display:flex;gap:2rem;flex-wrap:wrap;margin:.8rem 0}
.figure .value{font-size:1.4rem;font-weight:600} .figure .label{font-size:.8rem;color:#52606d}
table{border-collapse:collapse;font-size:.85rem;width:100%} th,td{padding:.25rem .5rem;border-bottom:1px solid #e4e7eb;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.status-merged,.status-ok{color:#1a7f37} .status-failed,.status-drift,.error{color:#b42318} .status-behind{color:#9a6700} .failed-try{color:#9a3412;font-size:.8rem} .status-extracted{color:#9a6700}
.message{padding:.6rem 1rem;border-radius:6px;background:#e6f4ea;margin-bottom:1rem}
.message.bad{background:#fdecea}
form.resnapshot input[type=text]{width:28rem;font-family:monospace}
form.replay input[type=text]{width:14rem;font-family:monospace} .hint{font-size:.8rem;color:#52606d;margin-top:.3rem}
a{color:#1d4ed8}
"""


def _seconds(value: float | None) -> str:
    if value is None:
        return "–"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min" if value < 7200 else f"{value / 3600:.1f} h"


def _count(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _rate(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.1f}" if value < 10 else f"{value:,.0f}"


def latency_points(history: Sequence[BatchRecord]) -> list[tuple[dt.datetime, float]]:
    """(applied at, seconds from the leader's commit to the follower's) of each merged stream batch
    that has a commit time, oldest first: the pipeline's lag over time. (A replay re-reads old
    transactions on purpose: its delay is not lag.)"""
    points = [(r.merged_at, (r.merged_at - r.end_time).total_seconds()) for r in history
              if r.status == "merged" and r.kind == "stream" and r.merged_at and r.end_time]
    return sorted(points)


def lag_chart(points: Sequence[tuple[dt.datetime, float]], width: int = 640, height: int = 160) -> str:
    if not points:
        return '<p class="chart-empty">No merged batch with a commit time yet: the chart starts with the first one.</p>'
    pad = 36
    t0, t1 = points[0][0], points[-1][0]
    span = max((t1 - t0).total_seconds(), 1.0)
    top = max(max(v for _, v in points), 1.0)
    xy = [(pad + (t - t0).total_seconds() / span * (width - 2 * pad), height - pad - v / top * (height - 2 * pad))
          for t, v in points]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3"><title>{escape(str(t))} UTC: {v:.1f} s</title></circle>'
                   for (x, y), (t, v) in zip(xy, points))
    return (
        f'<svg class="lag-chart" width="{width}" height="{height}" role="img" aria-label="lag over time">'
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#9aa5b1"/>'
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#9aa5b1"/>'
        f'<text x="2" y="{pad + 4}" font-size="10">{top:.0f} s</text>'
        f'<text x="2" y="{height - pad}" font-size="10">0</text>'
        f'<text x="{pad}" y="{height - 8}" font-size="10">{escape(t0.strftime("%m-%d %H:%M"))}</text>'
        f'<text x="{width - pad - 60}" y="{height - 8}" font-size="10">{escape(t1.strftime("%m-%d %H:%M"))}</text>'
        f'<polyline fill="none" stroke="#2563eb" stroke-width="2" points="{line}"/>{dots}</svg>'
    )


def _history_table(name: str, history: Sequence[BatchRecord]) -> str:
    if not history:
        return "<p>No batch yet.</p>"
    rows = []
    for r in history:
        run = f'<a target="_top" href="../dags/{quote(name)}/runs/{quote(r.run_id, safe="")}">{escape(r.run_id)}</a>'
        span = f"{escape(r.start_position or '')} → {escape(r.end_position or '')}" if r.start_position else ""
        error = f'<div class="error">{escape(r.error)}</div>' if r.error else ""
        # every failed try, the retried ones too (a run that succeeded on its third try says why
        # the first two failed)
        error += "".join(f'<div class="failed-try">{escape(t.task_id)} try {t.try_number} failed: '
                         f'{escape(t.error.removeprefix(t.task_id + ": "))}</div>' for t in r.failed_tries)
        rows.append(
            f'<tr class="batch"><td>{run}</td><td>{escape(r.kind)}</td><td>{span}</td>'
            f'<td class="num">{_count(r.rows_in)}</td><td class="num">{_count(r.net_rows)}</td>'
            f'<td class="num">{_seconds(r.extract_seconds)}</td><td class="num">{_rate(r.rate(r.extract_seconds))}</td>'
            f'<td class="num">{_seconds(r.merge_seconds)}</td><td class="num">{_rate(r.rate(r.merge_seconds))}</td>'
            f'<td class="status-{escape(r.status)}">{escape(r.status)}{error}</td></tr>'
        )
    return ("<table class=\"history\"><tr><th>run</th><th>kind</th><th>range</th><th>rows in</th><th>net rows</th>"
            "<th>extract</th><th>rows/s</th><th>merge</th><th>rows/s</th><th>status</th></tr>" + "".join(rows)
            + "</table>")


def _verification(name: str, result: VerificationResult | None) -> str:
    verify_dag = f'<a target="_top" href="../dags/{quote(name)}_verify">{escape(name)}_verify</a>'
    if result is None:
        return f"<p class=\"verification\">Not verified yet: trigger {verify_dag}.</p>"
    when = result.finished_at.strftime("%Y-%m-%d %H:%M:%S UTC") if result.finished_at else "?"
    if result.behind is not None:  # nothing compared: the follower was behind, not different
        return (f'<p class="verification status-behind">BEHIND, NOT VERIFIED at {when}: {escape(result.behind)} '
                f"({verify_dag})</p>")
    detail = ""
    if result.drifted:
        detail = "<ul>" + "".join(
            f"<li>{escape(c.table)} chunk {c.index} (keys {escape(str(c.lo))} … {escape(str(c.hi))}): leader "
            f"{c.leader_rows:,} rows, follower {c.follower_rows:,}</li>" for c in result.drifted) + "</ul>"
    if result.missing:
        detail += "<p>Missing on the follower: " + ", ".join(escape(t) for t in result.missing) + "</p>"
    return (f'<p class="verification status-{result.status}">{escape(result.status.upper())} at {when}: '
            f"{plural(result.tables, 'table')}, {plural(result.chunks, 'chunk')}, {result.rows:,} rows compared, "
            f"{result.rechecked} rechecked after a merge ({verify_dag})</p>{detail}")


def _lake_tables(view: PipelineView) -> str:
    """A lake's tables at the consistent cut: each with the version readers time-travel to."""
    versions = view.figures.table_versions
    if versions is None:
        return ""
    reference = view.config.follower_config or {}
    rows = "".join(f'<tr class="lake-table"><td>{escape(name)}</td><td class="num">{version}</td>'
                   f"<td><code>{escape(view.config.kind.table_uri(reference, name))}</code> VERSION AS OF {version}</td></tr>"
                   for name, version in versions.items())
    return ("<h3>Lake tables at the consistent cut</h3>"
            + (f'<table class="lake-tables"><tr><th>table</th><th>version</th><th>read it as of the cut</th></tr>'
               f"{rows}</table>" if rows else "<p>No table in the lake yet.</p>"))


def _resnapshot_form(name: str, suggested: Sequence[str]) -> str:
    value = escape(", ".join(suggested))
    return (f'<form class="resnapshot" method="post" action="pipelines/{quote(name)}/resnapshot">'
            f'<label>Re-snapshot tables (db.table globs, comma-separated; * for all): '
            f'<input type="text" name="tables" value="{value}" required pattern="\\s*[^,\\s]+\\.[^,\\s]+(\\s*,\\s*[^,\\s]+\\.[^,\\s]+)*\\s*|\\s*\\*\\s*" '
            f'title="db.table globs such as shop.orders, shop.*; or * for every table"></label> '
            f'<button type="submit">Re-snapshot</button></form>')


# The replay form checks in the browser what the run would refuse: both positions or neither is
# not a choice here (the form is only for a replay), each is FILE:OFFSET, and end is after start.
# The server checks the same again (run_params.replay_range) and answers in words.
REPLAY_SCRIPT = r"""
function positionOf(text) {
  const m = /^(.*)\.([0-9]+):([0-9]+)$/.exec(text.trim());
  return m ? [BigInt(m[2]), BigInt(m[3])] : null;
}
function checkReplay(form) {
  const start = form.elements.start, end = form.elements.end;
  for (const input of [start, end]) {
    input.setCustomValidity(input.validity.patternMismatch ?
      `${input.title}: "${input.value}" is not FILE:OFFSET, e.g. binlog.000003:1146` : "");
  }
  const a = positionOf(start.value), b = positionOf(end.value);
  if (a && b && !(a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]))) {
    end.setCustomValidity(`end ${end.value} must be after start ${start.value}: the range [start, end) is empty`);
  }
}
document.querySelectorAll("form.replay").forEach(form => {
  form.addEventListener("input", () => checkReplay(form));
  form.addEventListener("submit", event => { checkReplay(form); if (!form.reportValidity()) event.preventDefault(); });
});
"""


def _replay_form(name: str, checkpoint: str | None, leader: str | None) -> str:
    pattern = escape(POSITION_PATTERN.strip("^$"))
    field = ('<label>{label}: <input type="text" name="{key}" required pattern="{pattern}" title="{label}" '
             'placeholder="{example}" autocomplete="off"></label> ')
    return (f'<form class="replay" method="post" action="pipelines/{quote(name)}/replay" novalidate>'
            + field.format(label="start", key="start", pattern=pattern, example=escape(checkpoint or "binlog.000003:4"))
            + field.format(label="end", key="end", pattern=pattern, example=escape(leader or "binlog.000003:1146"))
            + '<button type="submit">Replay binlog range</button>'
            '<div class="hint">Reads [start, end) from the leader again; the part the follower already has is a '
            'no-op. Positions are FILE:OFFSET (SHOW BINARY LOGS on the leader); start must not be after the '
            'checkpoint.</div></form>')


def _batch_storage(view: PipelineView) -> tuple[str, str]:
    """The batch store's figure: what retention kept at its last pass (``batch_retention``)."""
    retain = view.config.batches.retain
    record = view.batch_storage
    if retain is None:
        return "kept forever", "change batches (batches: {retain: null})"
    if record is None:
        return "not measured yet", f"change batches (retire_batches keeps {escape(retain)})"
    return (f"{record.kept_bytes / 2**20:,.1f} MiB",
            f"in {plural(record.kept_batches, 'change batch', 'change batches')} (retain {escape(record.retain)}; "
            f"{plural(record.deleted_batches, 'batch', 'batches')} deleted at {escape(record.ran_at)})")


def pipeline_section(view: PipelineView) -> str:
    name = view.config.name
    # target _top: Airflow shows this page in a frame of its own UI (the plugin's nav entry)
    links = (f'<a target="_top" href="../dags/{quote(name)}">DAG</a> · '
             f'<a target="_top" href="../dags/{quote(name)}/runs">runs</a> · '
             f'<a href="api/pipelines">JSON</a>')
    head = f'<section class="pipeline" id="pipeline-{escape(name)}"><h2>{escape(name)}</h2><p>{links}</p>'
    if view.figures is None:
        return head + f'<p class="error">Cannot read this pipeline: {escape(view.error or "")}</p></section>'
    f = view.figures
    figures = "".join(
        f'<div class="figure" data-figure="{key}"><div class="value">{value}</div><div class="label">{label}</div></div>'
        for key, value, label in (
            ("seconds_behind", _seconds(f.seconds_behind), "behind the leader"),
            ("bytes_behind", _count(f.bytes_behind), "binlog bytes behind"),
            ("checkpoint_position", escape(str(f.checkpoint.position) if f.checkpoint else "none yet"),
             "checkpoint" + (f" (GTID set {escape(f.checkpoint.gtid_set)})" if f.checkpoint and f.checkpoint.gtid_set
                             else "")),
            ("leader_position", escape(str(f.leader_position)), "leader now"),
            ("batch_storage", *_batch_storage(view)),
        ))
    suggested = f.verification.drifted_tables if f.verification else []
    return (head + f'<div class="figures">{figures}</div>'
            f"<h3>Lag over time (leader commit → applied on the follower)</h3>{lag_chart(latency_points(f.history))}"
            f"<h3>Last batches</h3>{_history_table(name, f.history)}{_lake_tables(view)}"
            f"<h3>Verification</h3>{_verification(name, f.verification)}"
            f"<h3>Repair</h3>{_resnapshot_form(name, suggested)}"
            f"<h3>Replay</h3>{_replay_form(name, str(f.checkpoint.position) if f.checkpoint else None, str(f.leader_position))}"
            "</section>")


def render_page(views: Sequence[PipelineView], message: str | None = None, bad: bool = False) -> str:
    note = f'<div class="message{" bad" if bad else ""}">{escape(message)}</div>' if message else ""
    body = "".join(pipeline_section(v) for v in views) or "<p>No pipeline is configured.</p>"
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>CDC pipelines</title>"
            f"<style>{STYLE}</style></head><body><h1>CDC pipelines</h1>{note}{body}"
            f"<script>{REPLAY_SCRIPT}</script></body></html>")


def resnapshot_conf(tables: Sequence[str]) -> str:
    return json.dumps({"resnapshot": list(tables)})
