"""The report as one self-contained HTML page: no CDN, no server, under 1 MB for a 1,000-step run.

Charts are plotly figures (built with plotly's Python API) whose JSON, without plotly's style template,
is drawn as SVG by the page's own small renderer (assets/svgplot.js, the subset of plotly's figure
format these figures use). plotly.js itself (4.6 MB) would make a 1,000-step report 5.5 MB, too heavy
for a chat channel or e-mail. The page traps script errors first thing and, once every chart is drawn,
marks ``<body data-report-ready="1" data-charts-rendered="N">`` so a headless browser can check it.
"""

from __future__ import annotations

import json
import math
from html import escape
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from .spec import Card, Chart, Panel, Report, y_range

if TYPE_CHECKING:
    import plotly.graph_objects as go

SEVERITY_COLOR = {"error": "#c62828", "warning": "#ef6c00", "info": "#1565c0"}
BAND_COLOR = "rgba(46, 125, 50, 0.13)"
WINDOW_COLOR = "rgba(255, 160, 0, 0.16)"
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
           "#ff7f0e")


def figure(chart: Chart, window: tuple[int, int, int]) -> go.Figure:
    """The plotly figure of one chart: its series, the healthy band, the diagnosis window, rule lines."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for i, s in enumerate(chart.series):
        common = {"x": s.steps, "y": s.values, "name": s.name, "line": {"width": 1.4, "color": PALETTE[i % 10]}}
        if chart.kind == "stacked":
            fig.add_trace(go.Scatter(mode="lines", stackgroup="stages", **common))
        else:
            fig.add_trace(go.Scatter(mode="lines", **common))
    if chart.total is not None:
        fig.add_trace(go.Scatter(x=chart.total.steps, y=chart.total.values, name=chart.total.name, mode="lines",
                                 line={"width": 1.2, "color": "#222", "dash": "dot"}))
    lo, hi = y_range(chart)
    if chart.band is not None:
        y0 = lo if chart.band.low is None else max(chart.band.low, lo)
        y1 = hi if chart.band.high is None else min(chart.band.high, hi)
        if y0 < y1:
            fig.add_hrect(y0=y0, y1=y1, fillcolor=BAND_COLOR, line_width=0, layer="below")
    first, last, _ = window
    fig.add_vrect(x0=first - 0.5, x1=last + 0.5, fillcolor=WINDOW_COLOR, line_width=0, layer="below",
                  annotation_text="diagnosis window", annotation_position="top left",
                  annotation_font={"size": 10, "color": "#8a5a00"})
    for line in chart.lines:
        color = "#c62828" if line.kind == "capacity" else "#6a1b9a"
        fig.add_hline(y=line.value, line={"color": color, "width": 1.2, "dash": "solid" if line.kind == "capacity"
                                          else "dash"},
                      annotation_text=line.label, annotation_position="bottom left",
                      annotation_font={"size": 10, "color": color})
    fig.update_layout(
        template="plotly_white", height=300, margin={"l": 55, "r": 12, "t": 34, "b": 40},
        title={"text": chart.title, "font": {"size": 13}, "x": 0.01},
        showlegend=len(chart.series) > 1 or chart.total is not None,
        legend={"orientation": "h", "y": -0.22, "font": {"size": 10}}, hovermode="x",
        xaxis={"title": {"text": "step", "font": {"size": 10}}}, yaxis={"range": [lo, hi]},
    )
    return fig


def _num(x: float) -> str:
    return "nan" if not math.isfinite(x) else f"{x:.4g}"


def _chart_box(chart: Chart, index: int, cards: dict[str, Card]) -> str:
    badges = "".join(
        f'<a class="badge" style="background:{SEVERITY_COLOR[cards[d].severity]}" href="#diag-{escape(d)}">'
        f"{escape(d)}</a>" for d in chart.diagnoses if d in cards)
    band = ""
    attrs = ""
    if chart.band is not None:
        band = (f'<div class="band">healthy {escape(chart.band.describe())} '
                f'<span class="dim">({escape(chart.band.source)})</span></div>')
        attrs = (f' data-band-low="{"" if chart.band.low is None else repr(chart.band.low)}"'
                 f' data-band-high="{"" if chart.band.high is None else repr(chart.band.high)}"')
    sources = "".join(f"<li><code>{escape(m)}</code>: {escape(src)}</li>" for m, src in chart.sources.items())
    points = ", ".join(f"{s.name}: {len(s.steps):,} of {s.points:,} points" for s in chart.series
                       if len(s.steps) < s.points)
    thinned = f'<div class="dim">downsampled (min/max per bucket) — {escape(points)}</div>' if points else ""
    drawn = chart.metrics + ([chart.total.name] if chart.total is not None else [])
    return (f'<div class="chart-box" id="{escape(chart.id)}" data-metrics="{escape(" ".join(drawn))}"{attrs}>'
            f'<div class="chart-head">{badges}</div>'
            f'<div class="plot" data-fig="{index}"></div>{band}{thinned}'
            f'<details class="sources"><summary>verl source</summary><ul>{sources}</ul></details></div>')


def _diff_block(block_id: str, overrides: list[str], label: str) -> str:
    text = " \\\n".join(overrides)
    # the label is one flex item: bare text and <code> siblings would each be spread out by space-between
    return (f'<div class="diff"><div class="diff-head"><span>{label}</span> '
            f'<button type="button" class="copy" data-copy="{block_id}">copy</button></div>'
            f'<pre class="overrides" id="{block_id}">{escape(text)}</pre></div>')


_ROLE_LABEL = {
    "decides": "Proposed diff (decides the report; Hydra overrides, paste after your verl command)",
    "shares": "Proposed diff (the same as the chosen one; Hydra overrides)",
    "alternative": "Alternative diff (ranked after the chosen one; Hydra overrides)",
}


def _card(card: Card) -> str:
    rows = "".join(
        f"<tr class='ev'><td>{_metric_link(r.metric, r.chart)}</td><td>{_num(r.value)}</td><td>{_num(r.early)}</td>"
        f"<td>{escape(r.healthy) or '—'}</td></tr>"
        f"<tr class='ev-src'><td colspan='4' class='src'>verl source: {escape(r.source)}</td></tr>"
        for r in card.evidence)
    parts = [
        f'<article class="card" id="diag-{escape(card.id)}" data-severity="{card.severity}" '
        f'style="border-left-color:{SEVERITY_COLOR[card.severity]}">',
        f'<h3><span class="sev" style="background:{SEVERITY_COLOR[card.severity]}">{card.severity}</span> '
        f'{escape(card.id)} <span class="dim">{escape(card.name)} · {escape(card.tree)}</span></h3>',
        f'<p class="summary">{escape(card.summary)}</p>',
        f'<p class="explanation">{escape(card.explanation)}</p>',
        "<table class='evidence'><thead><tr><th>evidence</th><th>window median</th><th>early</th><th>healthy</th>"
        f"</tr></thead><tbody>{rows}</tbody></table>",
    ]
    if card.overrides:
        parts.append(_diff_block(f"diff-{card.id}", card.overrides, _ROLE_LABEL[card.role]))
        parts.append("<ul class='changes'>" + "".join(
            f"<li><code>{escape(c.key)}</code>: {escape(repr(c.old))} → {escape(repr(c.new))}"
            f"{' — ' + escape(c.reason) if c.reason else ''}</li>" for c in card.changes) + "</ul>")
    else:
        parts.append("<p class='dim'>No config diff: the remedy is outside the config, or none of its fixes keeps "
                     "the config valid.</p>")
    if card.checks:
        parts.append("<ul class='checks'>" + "".join(f"<li>check: {escape(c)}</li>" for c in card.checks) + "</ul>")
    parts.append("</article>")
    return "".join(parts)


def _metric_link(metric: str, chart: str | None) -> str:
    label = f"<code>{escape(metric)}</code>"
    return f'<a href="#{escape(chart)}">{label}</a>' if chart else label


def _panel(panel: Panel, start: int, cards: dict[str, Card]) -> tuple[str, int]:
    head = f'<section class="panel" id="panel-{panel.id}" data-panel="{panel.id}"><h2>{escape(panel.title)}</h2>'
    if panel.hidden is not None:
        note = f'<p class="note hidden-note">{escape(panel.title)} hidden: {escape(panel.hidden)}</p>'
        return head + note + "</section>", start
    boxes = []
    for i, chart in enumerate(panel.charts):
        boxes.append(_chart_box(chart, start + i, cards))
    aside = "".join(_card(c) for c in panel.cards)
    body = (f'<div class="panel-body{" with-cards" if aside else ""}"><div class="charts">{"".join(boxes)}</div>'
            + (f'<aside class="cards">{aside}</aside>' if aside else "") + "</div>")
    notes = "".join(f'<li class="note">{escape(n)}</li>' for n in panel.notes)
    return head + body + (f'<ul class="notes">{notes}</ul>' if notes else "") + "</section>", start + len(panel.charts)


def _summary(report: Report) -> str:
    first, last, size = report.window
    s0, s1, n = report.steps
    parts = [
        f"<h1>{escape(report.title)}</h1>",
        '<dl class="facts">',
        f"<dt>config</dt><dd><code>{escape(report.config_path)}</code> (verl {escape(report.verl_version)})</dd>",
        f"<dt>metrics</dt><dd><code>{escape(report.metrics_path)}</code>: steps {s0}–{s1} ({n:,} records)</dd>",
        f"<dt>mode</dt><dd>{escape(report.mode)}</dd>",
        f"<dt>diagnosis window</dt><dd>steps {first}–{last} ({size} steps), shaded on every chart</dd>",
        "</dl>",
    ]
    if report.overrides:
        parts.append(f'<div class="verdict">Change, decided by <a href="#diag-{escape(report.decided_by or "")}">'
                     f"{escape(report.decided_by or '')}</a>:</div>")
        parts.append(_diff_block("diff-chosen", report.overrides, "Hydra overrides (paste after your verl command)"))
        if report.edit is not None:
            path, diff = report.edit
            parts.append(f'<div class="diff"><div class="diff-head"><span>or as an edit of <code>{escape(path)}'
                         f'</code> (<code>advisor suggest ... --write</code> applies it)</span> '
                         f'<button type="button" class="copy" data-copy="diff-file">copy</button></div>'
                         f'<pre class="overrides" id="diff-file">'
                         f"{escape(diff)}</pre></div>")
    elif report.verdict == "inspect":
        parts.append(f'<div class="verdict">No config change: <a href="#diag-{escape(report.decided_by or "")}">'
                     f"{escape(report.decided_by or '')}</a>'s remedy is outside the config; see its checks.</div>")
    else:
        parts.append('<div class="verdict ok">No change: no diagnosis at warning level or above.</div>')
    if report.alternatives:
        parts.append("<div class='alts'><b>Alternatives</b> (ranked)<ol>" + "".join(
            f"<li><code>{escape('  '.join(a))}</code></li>" for a in report.alternatives) + "</ol></div>")
    if report.cards:
        parts.append("<div class='toc'><b>Diagnoses</b>: " + " ".join(
            f'<a class="badge" style="background:{SEVERITY_COLOR[c.severity]}" href="#diag-{escape(c.id)}">'
            f"{escape(c.id)}</a>" for c in report.cards) + "</div>")
    parts.append("<div class='toc'><b>Panels</b>: " + " · ".join(
        f'<a href="#panel-{p.id}">{escape(p.title)}</a>' for p in report.panels) + "</div>")
    return "".join(parts)


def _tables(report: Report) -> str:
    out = ['<section class="panel" id="batch"><h2>Batch layers</h2><ul class="batch">']
    out += [f"<li>{escape(w)}</li>" for w in report.batch_words]
    out.append("</ul></section>")
    out.append('<section class="panel" id="memory"><h2>GPU memory</h2>')
    if report.memory_rows is not None:
        out.append(f"<table class='memory'><caption>{escape(report.memory_title or '')}</caption><thead><tr>"
                   "<th>phase</th><th>peak GiB</th><th>of GPU</th><th>risk</th><th>largest parts (GiB)</th>"
                   "</tr></thead><tbody>")
        for row in report.memory_rows:
            largest = row["largest"] + (f"; {row['reason']}" if row["reason"] else "")
            share = "unknown" if row["percent"] is None else f"{row['percent']}%"
            out.append(f"<tr class='risk-{escape(row['risk'])}'><td>{escape(row['stage'])}</td>"
                       f"<td>{row['peak_gib']:.1f}</td><td>{share}</td><td>{escape(row['risk'])}</td>"
                       f"<td>{escape(largest)}</td></tr>")
        out.append("</tbody></table>")
    else:
        out.append(f'<p class="note">{escape(report.memory_note or "")}</p>')
    out.append("</section>")
    if report.notes:
        out.append('<section class="panel" id="notes"><h2>Notes</h2><ul>' +
                   "".join(f"<li class='dim'>{escape(n)}</li>" for n in report.notes) + "</ul></section>")
    return "".join(out)


def _figure_json(fig: go.Figure) -> str:
    """The figure's JSON without plotly's style template (about 10 KB per chart that the page's renderer
    does not read); numpy arrays stay plotly's compact base64 typed arrays."""
    doc = json.loads(fig.to_json())
    doc.get("layout", {}).pop("template", None)
    return json.dumps(doc, separators=(",", ":"))


def _json_for_script(text: str) -> str:
    # inside <script type="application/json"> only "</" can end the element early
    return text.replace("</", "<\\/")


def render_html(report: Report) -> str:
    """The whole page as a string."""
    cards = {c.id: c for c in report.cards}
    sections, index = [], 0
    for panel in report.panels:
        html, index = _panel(panel, index, cards)
        sections.append(html)
    figures = "[" + ",".join(_figure_json(figure(c, report.window)) for c in report.charts) + "]"
    return "".join([
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{escape(report.title)}</title>",
        # the error trap runs before anything else, so every script error on the page is recorded in the DOM
        f"<script>{_asset('error_trap.js')}</script><style>{_asset('report.css')}</style></head>",
        f'<body data-report-ready="0" data-charts-expected="{len(report.charts)}">',
        f"<header>{_summary(report)}</header><main>",
        *sections,
        _tables(report),
        '</main><footer><div class="dim">Written by advisor report (verl-advisor). Healthy bands: the metric '
        "catalog (knowledge/metrics.yaml); dashed lines: thresholds of the rules that fired.</div>"
        '<ul id="report-errors" data-count="0"></ul></footer>',
        f"<script>{_asset('svgplot.js')}</script>",
        f'<script type="application/json" id="report-figures">{_json_for_script(figures)}</script>',
        f"<script>{_asset('render.js')}</script></body></html>",
    ])


def _asset(name: str) -> str:
    # one name per joinpath: Python 3.10's Traversable.joinpath takes one
    return resources.files("advisor.report").joinpath("assets").joinpath(name).read_text(encoding="utf-8")


def write_html(report: Report, path: Path) -> Path:
    path.write_text(render_html(report), encoding="utf-8")
    return path
