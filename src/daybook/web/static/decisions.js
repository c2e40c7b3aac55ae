// The decisions view: a graph of each recorded decision (left), the acts that followed it
// (middle) and the obligations it opened (right), from /api/views/decisions. Text is set by
// ECharts as canvas text or by textContent: nothing from the journal becomes markup.
(function () {
  "use strict";
  var root = document.getElementById("view");
  var el = document.getElementById("decisions-chart");
  if (!root || !el || !window.echarts) { return; }
  el.style.height = "380px";
  var enc = window.echarts.format.encodeHTML;

  function short(value, n) {
    var text = typeof value === "string" ? value : JSON.stringify(value);
    if (text === undefined || text === null) { return ""; }
    return text.length > n ? text.slice(0, n - 1) + "\u2026" : text;
  }

  function draw(found) {
    var nodes = [], links = [], seen = {};
    var column = { decision: 0, mandate: 0, act: 1, obligation: 2 };
    var rows = { decision: 0, mandate: 0, act: 0, obligation: 0 };
    function node(id, kind, label, detail, state) {
      if (seen[id]) { return; }
      seen[id] = 1;
      var col = kind === "mandate" ? "decision" : kind;
      nodes.push({
        id: id, name: label, category: kind, value: detail,
        x: column[kind] * 320, y: rows[col]++ * 70, state: state || ""
      });
    }
    found.decisions.forEach(function (d) {
      var label = d.id + " " + d.name + (d.model ? "\n" + d.model + " \u00b7 " + (d.tokens || 0) + " tokens" : "");
      node("d:" + d.id, "decision", label, short(d.value, 120));
    });
    found.acts.forEach(function (a) {
      var from = a.decision ? "d:" + a.decision : "mandate";
      if (!a.decision) { node("mandate", "mandate", "mandate: " + found.mandate.workflow, short(found.mandate.input, 120)); }
      node("a:" + a.step, "act", "step " + a.step + " " + a.tool + "\n" + a.status, short(a.args, 120), a.status);
      links.push({ source: from, target: "a:" + a.step, value: "led to" });
    });
    found.obligations.forEach(function (o) {
      var from = o.decision && seen["d:" + o.decision] ? "d:" + o.decision : null;
      if (!from) { node("mandate", "mandate", "mandate: " + found.mandate.workflow, short(found.mandate.input, 120)); from = "mandate"; }
      node("o:" + o.id, "obligation", o.kind + " (" + o.state + ")\nowed by " + o.owner, short(o.about, 120), o.state);
      links.push({ source: from, target: "o:" + o.id, value: "opened" });
    });
    var chart = window.echarts.init(el);
    chart.setOption({
      animation: false,
      tooltip: { formatter: function (p) { return enc(String(p.data.value || "")); } },
      legend: { data: ["decision", "mandate", "act", "obligation"], top: 0 },
      series: [{
        type: "graph", layout: "none", roam: true, top: 40, bottom: 20, left: 120, right: 160,
        symbolSize: 18, edgeSymbol: ["none", "arrow"], edgeSymbolSize: 8,
        categories: [{ name: "decision" }, { name: "mandate" }, { name: "act" }, { name: "obligation" }],
        label: { show: true, position: "right", fontSize: 11 },
        edgeLabel: { show: true, fontSize: 10, formatter: function (p) { return p.data.value; } },
        data: nodes, links: links
      }]
    });
    window.addEventListener("resize", function () { chart.resize(); });
    root.setAttribute("data-ready", "1");
  }

  fetch(root.getAttribute("data-src"), { credentials: "same-origin" })
    .then(function (r) { return r.json(); })
    .then(draw)
    .catch(function (err) {
      var p = document.createElement("p");
      p.className = "flash error";
      p.textContent = "the picture could not be drawn: " + err;
      root.insertBefore(p, root.firstChild);
      root.setAttribute("data-ready", "error");
    });
}());
