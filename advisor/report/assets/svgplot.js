// A small SVG line-chart renderer for the report's figures (plotly's figure JSON, the subset html.py writes):
// scatter lines (plain or stacked), rectangles and lines in data or axis-fraction coordinates, text
// annotations, a title, a legend and a hover read-out. It replaces the 4.6 MB plotly.js bundle so that a
// report stays under 1 MB and still opens offline (bench/bench_report.py prints the size).
(function () {
  'use strict';
  var NS = 'http://www.w3.org/2000/svg';
  var TYPED = {i1: Int8Array, u1: Uint8Array, i2: Int16Array, u2: Uint16Array, i4: Int32Array,
               u4: Uint32Array, f4: Float32Array, f8: Float64Array};
  var DASH = {dot: '2,3', dash: '6,4', dashdot: '6,3,2,3', solid: ''};

  // plotly's Python side encodes numpy arrays as {dtype, bdata (base64)}; plain lists pass through
  function values(v) {
    if (!v) return [];
    if (Array.isArray(v)) return v.map(function (x) { return x === null ? NaN : +x; });
    var raw = atob(v.bdata), bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    return Array.prototype.slice.call(new TYPED[v.dtype](bytes.buffer));
  }

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) if (attrs[k] !== undefined && attrs[k] !== null) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function text(parent, x, y, s, attrs) {
    var t = el('text', attrs || {}, parent);
    t.setAttribute('x', x); t.setAttribute('y', y); t.textContent = s;
    return t;
  }

  // 1-2-5 steps covering [lo, hi] with about `count` ticks
  function ticks(lo, hi, count) {
    if (!(hi > lo)) return [lo];
    var raw = (hi - lo) / count, mag = Math.pow(10, Math.floor(Math.log10(raw))), step = mag;
    [1, 2, 5, 10].some(function (m) { step = m * mag; return step >= raw; });
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
    return out;
  }

  function label(v) {
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(1);
    return String(+v.toPrecision(4));
  }

  function draw(div, fig) {
    var layout = fig.layout || {}, margin = layout.margin || {}, traces = fig.data || [];
    var W = Math.max(div.clientWidth || 0, 320), H = layout.height || 300;
    var m = {l: margin.l || 55, r: margin.r || 12, t: margin.t || 34, b: margin.b || 40};
    var pw = W - m.l - m.r, ph = H - m.t - m.b;
    div.textContent = '';
    var series = traces.map(function (t) { return {t: t, x: values(t.x), y: values(t.y)}; });
    // stacked traces draw their running sum over the traces before them in the same stack group
    var sums = {};
    series.forEach(function (s) {
      if (!s.t.stackgroup) return;
      var below = sums[s.t.stackgroup];
      s.base = below || s.y.map(function () { return 0; });
      s.y = s.y.map(function (v, i) { return (isFinite(v) ? v : 0) + s.base[i]; });
      sums[s.t.stackgroup] = s.y;
    });
    var xs = [].concat.apply([], series.map(function (s) { return s.x; })).filter(isFinite);
    var x0 = Math.min.apply(null, xs.length ? xs : [0]), x1 = Math.max.apply(null, xs.length ? xs : [1]);
    if (x1 === x0) { x0 -= 0.5; x1 += 0.5; }
    var yr = (layout.yaxis || {}).range, y0, y1;
    if (yr) { y0 = yr[0]; y1 = yr[1]; } else {
      var ys = [].concat.apply([], series.map(function (s) { return s.y; })).filter(isFinite);
      y0 = Math.min.apply(null, ys.length ? ys : [0]); y1 = Math.max.apply(null, ys.length ? ys : [1]);
      if (y1 === y0) { y0 -= 1; y1 += 1; }
    }
    function X(v) { return m.l + (v - x0) / (x1 - x0) * pw; }
    function Y(v) { return m.t + (1 - (v - y0) / (y1 - y0)) * ph; }
    function px(ref, v) { return /domain|paper/.test(ref || '') ? m.l + v * pw : X(v); }
    function py(ref, v) { return /domain|paper/.test(ref || '') ? m.t + (1 - v) * ph : Y(v); }

    var svg = el('svg', {'class': 'chart-svg', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H,
                         role: 'img', 'aria-label': ((layout.title || {}).text || 'chart')}, div);
    el('rect', {x: 0, y: 0, width: W, height: H, fill: '#fff'}, svg);
    var clipId = 'clip-' + Math.random().toString(36).slice(2);
    el('rect', {x: m.l, y: m.t, width: pw, height: ph}, el('clipPath', {id: clipId}, el('defs', {}, svg)));
    var grid = el('g', {'class': 'grid', stroke: '#e6e6e6', 'stroke-width': 1}, svg);
    var axis = el('g', {'class': 'axis', fill: '#555', 'font-size': 10}, svg);
    ticks(y0, y1, 5).forEach(function (v) {
      if (v < y0 || v > y1) return;
      el('line', {x1: m.l, x2: m.l + pw, y1: Y(v), y2: Y(v)}, grid);
      text(axis, m.l - 5, Y(v) + 3, label(v), {'text-anchor': 'end'});
    });
    ticks(x0, x1, 6).forEach(function (v) {
      if (v < x0 || v > x1) return;
      el('line', {x1: X(v), x2: X(v), y1: m.t, y2: m.t + ph}, grid);
      text(axis, X(v), m.t + ph + 13, label(v), {'text-anchor': 'middle'});
    });
    var xt = ((layout.xaxis || {}).title || {}).text;
    if (xt) text(axis, m.l + pw / 2, H - 6, xt, {'text-anchor': 'middle'});

    function shape(s, parent) {
      var line = s.line || {}, attrs = {'clip-path': 'url(#' + clipId + ')'};
      var ax0 = px(s.xref, s.x0), ax1 = px(s.xref, s.x1), ay0 = py(s.yref, s.y0), ay1 = py(s.yref, s.y1);
      if (s.type === 'rect') {
        attrs.x = Math.min(ax0, ax1); attrs.y = Math.min(ay0, ay1);
        attrs.width = Math.abs(ax1 - ax0); attrs.height = Math.abs(ay1 - ay0); attrs.fill = s.fillcolor || 'none';
        el('rect', attrs, parent);
      } else if (s.type === 'line') {
        attrs.x1 = ax0; attrs.x2 = ax1; attrs.y1 = ay0; attrs.y2 = ay1; attrs.stroke = line.color || '#444';
        attrs['stroke-width'] = line.width || 1; attrs['stroke-dasharray'] = DASH[line.dash] || undefined;
        el('line', attrs, parent);
      }
    }
    var shapes = layout.shapes || [];
    var below = el('g', {'class': 'shapes-below'}, svg);
    shapes.filter(function (s) { return s.layer === 'below'; }).forEach(function (s) { shape(s, below); });

    var plot = el('g', {'class': 'traces', 'clip-path': 'url(#' + clipId + ')', fill: 'none'}, svg);
    series.forEach(function (s) {
      var line = s.t.line || {}, color = line.color || '#1f77b4', d = '', pen = false;
      for (var i = 0; i < s.x.length; i++) {
        if (!isFinite(s.x[i]) || !isFinite(s.y[i])) { pen = false; continue; }
        d += (pen ? 'L' : 'M') + X(s.x[i]).toFixed(1) + ',' + Y(s.y[i]).toFixed(1);
        pen = true;
      }
      if (s.base) {  // the band between this stack level and the one below
        var back = '';
        for (var j = s.x.length - 1; j >= 0; j--) back += 'L' + X(s.x[j]).toFixed(1) + ',' + Y(s.base[j]).toFixed(1);
        if (d) el('path', {d: d + back + 'Z', fill: color, 'fill-opacity': 0.45, stroke: 'none'}, plot);
      }
      if (d) el('path', {d: d, stroke: color, 'stroke-width': line.width || 1.4,
                          'stroke-dasharray': DASH[line.dash] || undefined, 'class': 'trace'}, plot);
    });
    var above = el('g', {'class': 'shapes-above'}, svg);
    shapes.filter(function (s) { return s.layer !== 'below'; }).forEach(function (s) { shape(s, above); });
    (layout.annotations || []).forEach(function (a) {
      var font = a.font || {}, anchor = {left: 'start', right: 'end'}[a.xanchor] || 'middle';
      var dy = {top: 10, bottom: -3}[a.yanchor] || 3;
      text(svg, px(a.xref, a.x) + (anchor === 'start' ? 3 : anchor === 'end' ? -3 : 0), py(a.yref, a.y) + dy,
           a.text, {'text-anchor': anchor, 'font-size': font.size || 10, fill: font.color || '#444'});
    });
    var title = layout.title || {};
    if (title.text) text(svg, 8, 18, title.text, {'font-size': (title.font || {}).size || 13, fill: '#222',
                                                   'font-weight': 600});
    el('rect', {x: m.l, y: m.t, width: pw, height: ph, fill: 'none', stroke: '#bbb'}, svg);

    if (layout.showlegend) {
      var legend = document.createElement('div');
      legend.className = 'legend';
      series.forEach(function (s) {
        var item = document.createElement('span'), sw = document.createElement('i');
        sw.style.background = (s.t.line || {}).color || '#1f77b4';
        item.appendChild(sw); item.appendChild(document.createTextNode(s.t.name || ''));
        legend.appendChild(item);
      });
      div.appendChild(legend);
    }
    hover(div, svg, series, m, pw, ph, X, Y, x0, x1);
    div.classList.add('drawn');
  }

  // a guide line and the value of every series at the step nearest the pointer
  function hover(div, svg, series, m, pw, ph, X, Y, x0, x1) {
    var guide = el('line', {y1: m.t, y2: m.t + ph, stroke: '#888', 'stroke-dasharray': '3,3', visibility: 'hidden'},
                   svg);
    var tip = document.createElement('div');
    tip.className = 'tip'; tip.hidden = true; div.appendChild(tip);
    function nearest(xsArr, v) {
      var lo = 0, hi = xsArr.length - 1;
      while (hi - lo > 1) { var mid = (lo + hi) >> 1; if (xsArr[mid] < v) lo = mid; else hi = mid; }
      return Math.abs(xsArr[lo] - v) <= Math.abs(xsArr[hi] - v) ? lo : hi;
    }
    svg.addEventListener('mousemove', function (e) {
      var box = svg.getBoundingClientRect(), sx = e.clientX - box.left;
      if (sx < m.l || sx > m.l + pw || !series.length) { guide.setAttribute('visibility', 'hidden'); tip.hidden = true; return; }
      var step = x0 + (sx - m.l) / pw * (x1 - x0), rows = [], at = null;
      series.forEach(function (s) {
        if (!s.x.length) return;
        var i = nearest(s.x, step), v = s.base ? s.y[i] - s.base[i] : s.y[i];
        if (at === null) at = s.x[i];
        rows.push((s.t.name || '') + ': ' + (isFinite(v) ? label(v) : 'n/a'));
      });
      guide.setAttribute('x1', X(at)); guide.setAttribute('x2', X(at)); guide.setAttribute('visibility', 'visible');
      tip.textContent = 'step ' + at + '\n' + rows.join('\n');
      tip.style.left = Math.min(sx + 12, box.width - 200) + 'px'; tip.style.top = (m.t + 4) + 'px';
      tip.hidden = false;
    });
    svg.addEventListener('mouseleave', function () { guide.setAttribute('visibility', 'hidden'); tip.hidden = true; });
  }

  window.SvgPlot = {draw: draw, values: values, ticks: ticks};
})();
