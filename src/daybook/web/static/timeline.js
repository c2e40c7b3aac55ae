// A run's timeline (web/timeline.py): the bars and marks from /api/views/timeline?run=RUN drawn
// with the vendored Apache ECharts (canvas), one custom series per status so the legend filters
// by status; zoom and pan on the x axis (time since the run started, or journal order); a click
// on a bar fetches its rows (&bar=N) and shows them under the chart, built with textContent
// (never innerHTML: the rows hold whatever tools and models returned). Sets data-ready="1" on
// #view once the chart is drawn (the browser tests and benchmarks/web.py wait for it).
(function () {
  "use strict";
  var view = document.getElementById("view");
  var box = document.getElementById("timeline-chart");
  var panel = document.getElementById("timeline-rows");
  if (!view || !box || !window.echarts) { return; }
  var COLORS = {
    confirmed: "#3d9b4f", resolved: "#2b7bbd", failed: "#d2413a", unknown: "#e6a700",
    compensated: "#8a5cc2", superseded: "#a3a3a3", open: "#8ecae6", cancelled: "#5b5b5b"
  };
  var MARK_COLORS = { crashed: "#d2413a", resumed: "#2b7bbd", started: "#555", replayed: "#7a9" };
  var STYLES = [];
  var src = view.getAttribute("data-src");
  var chart = null;
  var got = null;
  var axis = "time";

  function text(tag, value) {
    var el = document.createElement(tag);
    el.textContent = value === null || value === undefined ? "" : String(value);
    return el;
  }

  function failed(message) {
    box.textContent = "";
    box.appendChild(text("p", "The timeline could not be drawn: " + message));
    view.setAttribute("data-error", message);
  }

  // Bars by status: [x0, x1, lane, bar index, track in its lane, first seq, step].
  function seriesData(d) {
    var cols = {};
    d.bar_columns.forEach(function (c, i) { cols[c] = i; });
    var out = d.statuses.map(function () { return []; });
    var timeAxis = axis === "time";
    for (var i = 0; i < d.bars.length; i++) {
      var b = d.bars[i];
      var x0 = timeAxis ? b[cols.start] : b[cols.first_seq];
      var x1 = timeAxis ? b[cols.end] : b[cols.last_seq];
      out[b[cols.status]].push([x0, x1, b[cols.lane], i, b[cols.track], b[cols.first_seq], b[cols.step]]);
    }
    return out;
  }

  function renderBar(params, api) {
    var lane = api.value(2);
    var a = api.coord([api.value(0), lane]);
    var b = api.coord([api.value(1), lane]);
    var band = api.size([0, 1])[1] * 0.8;
    var h = band / got.tracks[lane];
    var top = a[1] - band / 2 + api.value(4) * h;
    var rect = { x: a[0], y: top + h * 0.1, width: Math.max(b[0] - a[0], 2), height: h * 0.8 };
    var shape = echarts.graphic.clipRectByRect(rect, params.coordSys);
    // One style object per status, not api.style() per bar: that call dominated the drawing.
    return shape && { type: "rect", shape: shape, style: STYLES[params.seriesIndex], transition: [] };
  }

  function renderMark(params, api) {
    var x = api.coord([api.value(0), 0])[0];
    var sys = params.coordSys;
    if (x < sys.x || x > sys.x + sys.width) { return null; }
    var kind = got.marks[params.dataIndex][0];
    var color = MARK_COLORS[kind] || "#888";
    var before = got.marks[params.dataIndex - 1];
    var children = [];
    if (kind === "resumed" && before && before[0] === "crashed") {
      // The time no process held the run: from its last row before the crash to the resume.
      var x0 = Math.max(api.coord([axis === "time" ? before[1] : before[2], 0])[0], sys.x);
      children.push({ type: "rect", shape: { x: x0, y: sys.y, width: x - x0, height: sys.height },
        style: { fill: "rgba(210, 65, 58, 0.08)" }, silent: true });
    }
    var left = x > sys.x + sys.width - 90;
    return {
      type: "group",
      children: children.concat([
        { type: "line", shape: { x1: x, y1: sys.y, x2: x, y2: sys.y + sys.height },
          style: { stroke: color, lineWidth: 2, lineDash: [6, 3] }, silent: true },
        { type: "text", x: left ? x - 3 : x + 3, y: sys.y + 2 + (params.dataIndex % 3) * 14,
          style: { text: kind, fill: color, font: "bold 12px sans-serif", align: left ? "right" : "left" } }
      ])
    };
  }

  function option(d) {
    var perStatus = seriesData(d);
    var cols = {};
    d.bar_columns.forEach(function (c, i) { cols[c] = i; });
    var perLane = d.lanes.map(function () { return 0; });
    d.bars.forEach(function (b) { perLane[b[cols.lane]] += 1; });
    STYLES = d.statuses.map(function (status) { return { fill: COLORS[status] || "#999" }; });
    var series = d.statuses.map(function (status, i) {
      return {
        type: "custom", name: status, renderItem: renderBar, data: perStatus[i],
        encode: { x: [0, 1], y: 2 }, itemStyle: { color: COLORS[status] || "#999" },
        progressive: 0, animation: false, clip: true, z: 2
      };
    });
    var timeAxis = axis === "time";
    series.push({
      type: "custom", name: "executions", renderItem: renderMark, animation: false, silent: false,
      data: d.marks.map(function (m) { return { name: m[0], value: [timeAxis ? m[1] : m[2], 0] }; }),
      encode: { x: 0, y: 1 }, z: 1, tooltip: { show: true }, itemStyle: { color: "#666" }
    });
    var last = timeAxis ? d.end : d.last_seq;
    return {
      animation: false,
      legend: { top: 0, data: d.statuses.concat(["executions"]) },
      grid: { left: 190, right: 30, top: 40, bottom: 70 },
      tooltip: { trigger: "item", renderMode: "richText", formatter: tip },
      xAxis: {
        type: "value", min: timeAxis ? 0 : 1, max: Math.max(last, timeAxis ? 0.001 : 2),
        name: timeAxis ? "seconds since the run started" : "journal row (seq)", nameLocation: "middle",
        nameGap: 25, axisLabel: { hideOverlap: true }
      },
      yAxis: {
        type: "category", inverse: true,
        data: d.lanes.map(function (l, i) { return l + " (" + perLane[i] + ")"; })
      },
      dataZoom: [
        { type: "slider", xAxisIndex: 0, filterMode: "weakFilter", bottom: 10 },
        { type: "inside", xAxisIndex: 0, filterMode: "weakFilter" }
      ],
      series: series
    };
  }

  // Plain text (the tooltip is drawn on the canvas: nothing in it is parsed as markup).
  function tip(p) {
    if (p.seriesName === "executions") {
      var m = got.marks[p.dataIndex];
      return m[0] + " at +" + m[1] + "s (row " + m[2] + "): " + m[3];
    }
    var b = got.bars[p.value[3]];
    var cols = {};
    got.bar_columns.forEach(function (c, i) { cols[c] = i; });
    return got.names[b[cols.name]] + " (step " + b[cols.step] + ", " + p.seriesName + ")\n" +
      "rows " + b[cols.first_seq] + " to " + b[cols.last_seq] + ", +" + b[cols.start] + "s to +" +
      b[cols.end] + "s\nclick for its rows";
  }

  function showRows(n) {
    panel.setAttribute("data-bar", String(n));
    panel.removeAttribute("data-loaded");
    fetch(src + "&bar=" + encodeURIComponent(n), { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (d) {
        panel.textContent = "";
        if (d.error) { panel.appendChild(text("p", d.error)); return; }
        panel.appendChild(text("h2", "Rows of " + d.name + " (" + d.lane + ", " + d.status + ")"));
        var table = document.createElement("table");
        table.id = "bar-rows";
        var head = document.createElement("tr");
        d.row_columns.forEach(function (c) { head.appendChild(text("th", c)); });
        var thead = document.createElement("thead");
        thead.appendChild(head);
        table.appendChild(thead);
        var body = document.createElement("tbody");
        d.rows.forEach(function (row) {
          var tr = document.createElement("tr");
          row.forEach(function (cell, i) {
            if (d.row_columns[i] === "data") {
              var td = document.createElement("td");
              td.appendChild(text("pre", cell));
              tr.appendChild(td);
            } else {
              tr.appendChild(text("td", d.row_columns[i] === "at" ? "+" + cell + "s" : cell));
            }
          });
          body.appendChild(tr);
        });
        table.appendChild(body);
        panel.appendChild(table);
        panel.setAttribute("data-loaded", "1");
      })
      .catch(function (e) { panel.textContent = ""; panel.appendChild(text("p", "could not load the rows: " + e)); });
  }

  function draw(d) {
    got = d;
    if (window.performance && performance.mark) { performance.mark("timeline-data"); }
    box.style.height = (160 + 48 * d.lanes.length) + "px";
    box.style.width = "100%";
    chart = echarts.init(box, null, { renderer: "canvas" });
    chart.on("finished", function ready() {
      chart.off("finished", ready);
      box.setAttribute("data-bars", String(d.bars.length));
      view.setAttribute("data-ready", "1");
      if (window.performance && performance.mark) { performance.mark("timeline-ready"); }
    });
    chart.on("click", function (p) {
      if (p.seriesName !== "executions" && p.value) { showRows(p.value[3]); }
    });
    chart.setOption(option(d));
    window.addEventListener("resize", function () { chart.resize(); });
  }

  function setAxis(name) {
    if (!got || name === axis) { return; }
    axis = name;
    chart.setOption(option(got), { replaceMerge: ["series"] });
    view.setAttribute("data-axis", axis);
  }

  ["axis-time", "axis-order"].forEach(function (id) {
    var button = document.getElementById(id);
    if (button) {
      button.addEventListener("click", function () { setAxis(button.getAttribute("data-axis")); });
    }
  });
  view.setAttribute("data-axis", axis);
  fetch(src, { credentials: "same-origin" })
    .then(function (r) { return r.json(); })
    .then(function (d) { if (d.error) { failed(d.error); } else { draw(d); } })
    .catch(function (e) { failed(String(e)); });
})();
