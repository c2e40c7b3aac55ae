// The decisions view: a graph of each recorded decision (left), the acts that followed it
// (middle) and the obligations it opened (right), from /api/views/decisions. Text is set by
// ECharts as canvas text (labels and tooltips alike): nothing from the journal becomes markup.
(function () {
  "use strict";
  var views = window.daybookViews;
  var el = document.getElementById("decisions-chart");
  if (!views || !views.root || !el || !window.echarts) { return; }

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
      // [column, row] on hidden axes: positions in the chart's own units, so a node stays
      // round and its label level whatever the number of rows.
      nodes.push({ id: id, name: label, category: kind, detail: detail, state: state || "", value: [column[kind], rows[col]++] });
    }
    found.decisions.forEach(function (d) {
      var label = d.id + " " + d.name + (d.model ? "\n" + d.model + " \u00b7 " + (d.tokens || 0) + " tokens" : "");
      node("d:" + d.id, "decision", label, short(d.value, 120));
    });
    (found.idle || []).forEach(function (d) {
      var label = d.id + " " + d.name + (d.model ? "\n" + d.model + " \u00b7 " + (d.tokens || 0) + " tokens" : "") + "\n(no act)";
      node("d:" + d.id, "decision", label, short(d.value, 120));
    });
    found.acts.forEach(function (a) {
      var from = a.decision ? "d:" + a.decision : "mandate";
      if (!a.decision) { node("mandate", "mandate", "mandate: " + found.mandate.workflow, short(found.mandate.input, 120)); }
      node("a:" + a.step, "act", "step " + a.step + " " + a.tool + "\n" + a.status, short(a.args, 120), a.status);
      links.push({ source: from, target: "a:" + a.step, detail: "led to" });
    });
    // An obligation hangs off the act its decision led to (what the act opened), else off the
    // decision itself, else off the mandate.
    var actOf = {};
    found.acts.forEach(function (a) { if (a.decision && !actOf[a.decision]) { actOf[a.decision] = "a:" + a.step; } });
    found.obligations.forEach(function (o) {
      var from = o.decision && actOf[o.decision] ? actOf[o.decision] : o.decision && seen["d:" + o.decision] ? "d:" + o.decision : null;
      if (!from) { node("mandate", "mandate", "mandate: " + found.mandate.workflow, short(found.mandate.input, 120)); from = "mandate"; }
      node("o:" + o.id, "obligation", o.kind + " (" + o.state + ")\nowed by " + o.owner, short(o.about, 120), o.state);
      links.push({ source: from, target: "o:" + o.id, detail: "opened" });
    });
    var most = Math.max(rows.decision, rows.act, rows.obligation, 1);
    el.style.height = Math.min(most * 80 + 70, 2400) + "px";  // 500 acts: dense, not 40,000 px
    views.chart(el, {
      animation: false,
      tooltip: views.tooltip(),
      legend: { data: ["decision", "mandate", "act", "obligation"], top: 0 },
      grid: { top: 40, bottom: 10, left: 40, right: 220 },
      xAxis: { type: "value", show: false, min: -0.1, max: 2.1 },
      yAxis: { type: "value", show: false, inverse: true, min: -0.5, max: most - 0.5 },
      series: [{
        type: "graph", layout: "none", coordinateSystem: "cartesian2d",
        symbolSize: 18, edgeSymbol: ["none", "arrow"], edgeSymbolSize: 8,
        categories: [{ name: "decision" }, { name: "mandate" }, { name: "act" }, { name: "obligation" }],
        label: { show: true, position: "right", fontSize: 11, lineHeight: 15 },
        edgeLabel: { show: true, fontSize: 10, formatter: function (p) { return p.data.detail; } },
        data: nodes, links: links
      }]
    });
    views.ready();
  }

  views.load(draw, views.failure("the picture"));
}());
