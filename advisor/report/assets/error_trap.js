// Installed first thing in <head>: records every script error and unhandled rejection, in the DOM once the
// footer's #report-errors list exists (a headless browser test reads it).
window.__reportErrors = [];
window.__reportError = function (msg) {
  window.__reportErrors.push(String(msg));
  var ul = document.getElementById('report-errors');
  if (ul) { var li = document.createElement('li'); li.textContent = String(msg); ul.appendChild(li);
            ul.setAttribute('data-count', String(window.__reportErrors.length)); }
};
window.addEventListener('error', function (e) { window.__reportError((e && e.message) || 'script error'); });
window.addEventListener('unhandledrejection', function (e) {
  window.__reportError('unhandled rejection: ' + (e && e.reason && (e.reason.message || e.reason)));
});
