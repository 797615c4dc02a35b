// Draw every chart from the JSON figures, then mark the page ready (data-report-ready, data-charts-rendered).
(function () {
  // errors from before the list existed (the head, the chart renderer): list them all, once
  var ul = document.getElementById('report-errors');
  ul.textContent = '';
  window.__reportErrors.forEach(function (m) {
    var li = document.createElement('li'); li.textContent = m; ul.appendChild(li);
  });
  ul.setAttribute('data-count', String(window.__reportErrors.length));
  function finish() {
    var drawn = Array.prototype.filter.call(document.querySelectorAll('.plot.drawn'),
      function (d) { return d.querySelector('svg.chart-svg .trace'); }).length;
    document.body.setAttribute('data-charts-rendered', String(drawn));
    document.body.setAttribute('data-report-ready', '1');
  }
  try {
    var figs = JSON.parse(document.getElementById('report-figures').textContent);
    var divs = document.querySelectorAll('.plot[data-fig]');
    function drawAll() {
      Array.prototype.forEach.call(divs, function (div) {
        try { SvgPlot.draw(div, figs[Number(div.getAttribute('data-fig'))]); }
        catch (err) { window.__reportError(err && err.message || err); }
      });
    }
    drawAll();
    finish();
    var pending = null;  // redraw at the new width once resizing settles
    window.addEventListener('resize', function () { clearTimeout(pending); pending = setTimeout(drawAll, 150); });
  } catch (err) { window.__reportError(err && err.message || err); finish(); }
  document.addEventListener('click', function (e) {
    var b = e.target.closest && e.target.closest('button.copy');
    if (!b) return;
    var pre = document.getElementById(b.getAttribute('data-copy'));
    function selectIt() {
      var r = document.createRange(); r.selectNodeContents(pre);
      var s = window.getSelection(); s.removeAllRanges(); s.addRange(r);
      try { b.textContent = document.execCommand('copy') ? 'copied' : 'selected: Ctrl-C'; }
      catch (err) { b.textContent = 'selected: Ctrl-C'; }
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(pre.textContent).then(function () { b.textContent = 'copied'; }, selectIt);
    } else { selectIt(); }
  });
})();
