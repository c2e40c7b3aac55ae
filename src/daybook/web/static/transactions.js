// The transactions view: a waits-for graph from /api/views/transactions. A node is an open
// transaction attempt (its id, epoch, run, how long it has been open); an arrow goes from a
// waiting attempt to the earlier one on an overlapping scope that it waits for, labelled with
// the scopes and how long it has waited. Holders on the right, waiters to their left.
(function () {
  "use strict";
  var views = window.daybookViews;
  var el = document.getElementById("transactions-chart");
  if (!views || !views.root || !el || !window.echarts) { return; }

  function secs(s) { return s < 60 ? s.toFixed(1) + "s" : (s / 60).toFixed(1) + "min"; }

  function draw(found) {
    // Depth: 0 for a holder that waits for nobody, one more per wait.
    var byId = {}, depth = {};
    found.nodes.forEach(function (n) { byId[n.tx_id] = n; });
    function depthOf(id, seen) {
      if (depth[id] !== undefined) { return depth[id]; }
      if (seen[id]) { return 0; }
      seen[id] = 1;
      var d = 0;
      (byId[id] ? byId[id].waits_for : []).forEach(function (h) { d = Math.max(d, depthOf(h, seen) + 1); });
      depth[id] = d;
      return d;
    }
    var rows = {}, deepest = 0, most = 1;
    found.nodes.forEach(function (n) { deepest = Math.max(deepest, depthOf(n.tx_id, {})); });
    var nodes = found.nodes.map(function (n) {
      var d = depthOf(n.tx_id, {});
      rows[d] = (rows[d] || 0) + 1;
      most = Math.max(most, rows[d]);
      return {
        id: n.tx_id,
        // [column, row] on hidden axes: holders on the right, each wait one column left.
        value: [deepest - d, rows[d] - 1],
        name: n.tx_id + "\nepoch " + n.epoch + " \u00b7 run " + n.run_id + "\n" + n.role + " \u00b7 open " + secs(n.open_for),
        category: n.role,
        symbolSize: n.mine ? 26 : 18,
        detail: n.tx_id + " (" + n.status + "), run " + n.run_id + " " + (n.run_status || "") +
          (n.lease_owner ? ", lease " + n.lease_owner : "") + "; scopes " + n.scopes.join(", ")
      };
    });
    var links = found.edges.map(function (e) {
      return {
        source: e.from, target: e.to,
        label: { show: true, formatter: "waits " + secs(e.waited) + " on " + e.scopes.join(", ") },
        detail: e.from + " waits for " + e.to + " on " + e.scopes.join(", ") + " for " + secs(e.waited)
      };
    });
    el.style.height = found.nodes.length ? (most * 90 + 80) + "px" : "60px";
    views.chart(el, {
      animation: false,
      title: found.nodes.length ? undefined : { text: "no open transaction of this run, nobody waiting", textStyle: { fontSize: 13 } },
      tooltip: views.tooltip(),
      legend: { data: ["holding", "waiting"], top: 0 },
      grid: { top: 40, bottom: 10, left: 40, right: 260 },
      xAxis: { type: "value", show: false, min: -0.1, max: Math.max(deepest, 1) + 0.1 },
      yAxis: { type: "value", show: false, inverse: true, min: -0.5, max: most - 0.5 },
      series: [{
        type: "graph", layout: "none", coordinateSystem: "cartesian2d", symbolSize: 20,
        edgeSymbol: ["none", "arrow"], edgeSymbolSize: 10,
        categories: [{ name: "holding", itemStyle: { color: "#2f7d32" } }, { name: "waiting", itemStyle: { color: "#e6a23c" } }],
        label: { show: true, position: "right", fontSize: 11, lineHeight: 15 },
        edgeLabel: { fontSize: 10 },
        lineStyle: { width: 2, curveness: 0.1 },
        data: nodes, links: links
      }]
    });
    views.ready();
  }

  views.load(draw, views.failure("the picture"));
}());
