// The run tree (`?view=tree`): the runs and branches that belong together, drawn by the vendored
// ECharts as a tidy tree (SVG, so every label is text a person can select). The JSON comes from
// /api/views/tree; labels go in as text, never as HTML. A click opens the node's page.
(function () {
  "use strict";
  var views = window.daybookViews;
  var box = document.getElementById("tree-chart");
  if (!views || !views.root || !box || !window.echarts) { return; }
  var colours = {
    completed: "#3a9d4f", won: "#3a9d4f", chosen: "#3a9d4f", read: "#3a9d4f", restored: "#2f7fc1",
    rerun: "#2f7fc1", retried: "#2f7fc1",
    running: "#e0a020", pending: "#e0a020", suspended: "#7fa7d9", paused: "#7fa7d9",
    needs_attention: "#e07b20", stuck: "#c0392b", failed: "#c0392b", conflict: "#e07b20",
    cancelled: "#888888", expired: "#888888", lost: "#999999", cut: "#999999"
  };
  var shapes = { run: "circle", speculation: "diamond", branch: "triangle", "journal-branch": "rect", revision: "pin" };
  var count = 0;
  var widest = 0;  // the longest label, in characters: the margins leave room for it
  function item(node) {
    count += 1;
    widest = Math.max(widest, node.label.length + node.status.length + 3);
    var current = node.current;
    return {
      name: node.label,
      value: node.status,
      href: node.href,
      relation: node.relation,
      detail: node.detail,
      symbol: shapes[node.kind] || "circle",
      symbolSize: current ? 22 : 12,
      itemStyle: {
        color: colours[node.status] || "#666666",
        borderColor: current ? "#111111" : "#ffffff",
        borderWidth: current ? 4 : 1
      },
      label: { fontWeight: current ? "bold" : "normal" },
      children: (node.children || []).map(item)
    };
  }
  views.load(function (data) {
    var root = item(data.root);
    box.style.height = Math.max(240, count * 34) + "px";
    var chart = window.echarts.init(box, null, { renderer: "svg" });
    chart.setOption({
      animation: false,
      tooltip: {
        trigger: "item",
        formatter: function (p) {
          // Built from text nodes: nothing from the store is read as HTML.
          var div = document.createElement("div");
          [p.name, p.data.relation + " - " + p.value, p.data.detail].forEach(function (line) {
            var d = document.createElement("div");
            d.textContent = line;
            div.appendChild(d);
          });
          return div;
        }
      },
      series: [{
        type: "tree",
        data: [root],
        orient: "LR",
        top: 20, bottom: 20,
        left: Math.min(240, 20 + 3.5 * (data.root.label.length + data.root.status.length + 3)),
        right: Math.min(420, 30 + 7 * widest),
        initialTreeDepth: -1,
        expandAndCollapse: false,
        roam: true,
        label: {
          position: "top", distance: 8, fontSize: 12,
          formatter: function (p) { return p.name + " [" + p.value + "]"; }
        },
        leaves: { label: { position: "right", verticalAlign: "middle", align: "left", distance: 8 } },
        lineStyle: { color: "#aab", width: 1.5, curveness: 0.4 }
      }]
    });
    chart.on("click", function (p) {
      if (p.data && p.data.href) { window.location.assign(p.data.href); }
    });
    views.ready();
  }, views.failure("The tree", "1"));  // "1" even so: the page is as drawn as it will be
})();
