// What the run views' scripts (static/NAME.js) share, as `window.daybookViews`: web/views.py
// loads this file before each view's own script (a static file, no inline script: the CSP
// allows scripts from the inspector only). A view's root element is `#view`, whose `data-src`
// names its JSON; the script sets `data-ready="1"` on it once drawn (the browser tests and
// benchmarks/web.py wait for it).
window.daybookViews = (function () {
  "use strict";
  var root = document.getElementById("view");

  // Tooltips are drawn on the canvas (renderMode "richText"): no DOM, no inline style (the CSP
  // allows none), no markup. `plain` keeps ECharts' rich-text braces from styling journal text.
  function plain(value) { return String(value === undefined || value === null ? "" : value).replace(/[{}|]/g, " "); }

  // An ECharts tooltip option showing `text(p)` (default: the item's `detail`) as plain canvas
  // text; `extra` adds options (e.g. trigger: "axis").
  function tooltip(text, extra) {
    var option = {
      renderMode: "richText",
      formatter: function (p) { return plain(text ? text(p) : p.data.detail); }
    };
    Object.keys(extra || {}).forEach(function (k) { option[k] = extra[k]; });
    return option;
  }

  // A chart in `el` drawn with `option`, following the window's size.
  function chart(el, option, init) {
    var drawn = window.echarts.init(el, null, init);
    drawn.setOption(option);
    window.addEventListener("resize", function () { drawn.resize(); });
    return drawn;
  }

  function ready() { root.setAttribute("data-ready", "1"); }

  // A `failed` for `load`: says "WHAT could not be drawn: ..." above the view and sets
  // data-ready to `state` ("error" unless given).
  function failure(what, state) {
    return function (message) {
      var p = document.createElement("p");
      p.className = "flash error";
      p.textContent = what + " could not be drawn: " + message;
      root.insertBefore(p, root.firstChild);
      root.setAttribute("data-ready", state || "error");
    };
  }

  // The view's JSON (`#view[data-src]`) handed to `draw`; a failure (network, JSON, or `draw`
  // throwing) handed to `failed` as text.
  function load(draw, failed) {
    fetch(root.getAttribute("data-src"), { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(draw)
      .catch(function (err) { failed(String(err)); });
  }

  return { root: root, plain: plain, tooltip: tooltip, chart: chart, ready: ready, failure: failure, load: load };
}());
