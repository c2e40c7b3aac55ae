// A run's timeline (web/timeline.py): the bars and marks from /api/views/timeline?run=RUN drawn
// with the vendored Apache ECharts (canvas), one custom series per status so the legend filters
// by status; zoom and pan on the x axis (time since the run started, or journal order); a click
// on a bar fetches its rows (&bar=N) and shows them under the chart, built with textContent
// (never innerHTML: the rows hold whatever tools and models returned). Sets data-ready="1" on
// #view once the chart is drawn (the browser tests and benchmarks/web.py wait for it).
//
// Each status's bars are drawn as one canvas path (a shape of many rectangles), not one element
// per bar: 10,000 elements took most of a second to lay out, one path a few milliseconds. So the
// pointer is matched to a bar here (`barAt`), for the click and for the tip.
(function () {
  "use strict";
  var views = window.daybookViews;
  var view = views && views.root;
  var box = document.getElementById("timeline-chart");
  var panel = document.getElementById("timeline-rows");
  if (!view || !box || !window.echarts) { return; }
  var COLORS = {
    confirmed: "#3d9b4f", resolved: "#2b7bbd", failed: "#d2413a", unknown: "#e6a700",
    compensated: "#8a5cc2", superseded: "#a3a3a3", open: "#8ecae6", cancelled: "#5b5b5b"
  };
  var MARK_COLORS = { crashed: "#d2413a", resumed: "#2b7bbd", started: "#555", replayed: "#7a9" };
  var MIN_WIDTH = 2; // pixels: a step of one row (a decision) is still a visible bar
  var src = view.getAttribute("data-src");
  var chart = null;
  var got = null; // the JSON drawn
  var cols = {}; // bar column name -> index
  var perStatus = []; // per status, its bars: [x0, x1, lane, bar index, track, first seq, step]
  var hidden = {}; // statuses the legend turned off
  var axis = "time";
  var tip = null;

  echarts.graphic.registerShape("daybookBars", echarts.graphic.extendShape({
    type: "daybookBars",
    shape: { rects: [] },
    buildPath: function (ctx, shape) {
      var r = shape.rects;
      for (var i = 0; i < r.length; i += 4) { ctx.rect(r[i], r[i + 1], r[i + 2], r[i + 3]); }
    }
  }));

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

  function seriesData(d) {
    var out = d.statuses.map(function () { return []; });
    var timeAxis = axis === "time";
    for (var i = 0; i < d.bars.length; i++) {
      var b = d.bars[i];
      // In journal order a row is a slot one wide, centred on its seq.
      var x0 = timeAxis ? b[cols.start] : b[cols.first_seq] - 0.4;
      var x1 = timeAxis ? b[cols.end] : b[cols.last_seq] + 0.4;
      out[b[cols.status]].push([x0, x1, b[cols.lane], i, b[cols.track], b[cols.first_seq], b[cols.step]]);
    }
    return out;
  }

  // Where things are in pixels now: x = ax + kx * value; lane i's band is centred on laneY[i].
  function frame(toPixel) {
    var p0 = toPixel([0, 0]);
    var p1 = toPixel([1, 1]);
    return { ax: p0[0], kx: p1[0] - p0[0], y0: p0[1], ky: p1[1] - p0[1], band: Math.abs(p1[1] - p0[1]) * 0.8 };
  }

  // The rectangle of one bar item in pixels: [x, y, width, height].
  function rectOf(f, item) {
    var x0 = f.ax + f.kx * item[0];
    var x1 = f.ax + f.kx * item[1];
    var h = f.band / got.tracks[item[2]];
    var top = f.y0 + f.ky * item[2] - f.band / 2 + item[4] * h;
    return [x0, top + h * 0.1, Math.max(x1 - x0, MIN_WIDTH), h * 0.8];
  }

  // All of a status's bars, drawn once (on its first item; the other items draw nothing).
  function renderBars(params, api) {
    if (params.dataIndex !== 0) { return null; }
    var items = perStatus[params.seriesIndex];
    var sys = params.coordSys;
    var f = frame(function (v) { return api.coord(v); });
    var left = sys.x;
    var right = sys.x + sys.width;
    var rects = [];
    for (var i = 0; i < items.length; i++) {
      var r = rectOf(f, items[i]);
      if (r[0] > right || r[0] + r[2] < left) { continue; }
      var x0 = Math.max(r[0], left);
      var x1 = Math.min(r[0] + r[2], right);
      rects.push(x0, r[1], Math.max(x1 - x0, Math.min(MIN_WIDTH, right - x0)), r[3]);
    }
    var color = COLORS[got.statuses[params.seriesIndex]] || "#999";
    return { type: "daybookBars", shape: { rects: rects }, style: { fill: color }, silent: true };
  }

  function renderMark(params, api) {
    var x = api.coord([api.value(0), 0])[0];
    var sys = params.coordSys;
    if (x < sys.x - 1 || x > sys.x + sys.width + 1) { return null; }
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
        { type: "text", x: left ? x - 3 : x + 3, y: sys.y + 2 + (params.dataIndex % 3) * 14, silent: true,
          style: { text: kind, fill: color, font: "bold 12px sans-serif", align: left ? "right" : "left" } }
      ])
    };
  }

  function option(d) {
    perStatus = seriesData(d);
    var perLane = d.lanes.map(function () { return 0; });
    d.bars.forEach(function (b) { perLane[b[cols.lane]] += 1; });
    var series = d.statuses.map(function (status, i) {
      return {
        type: "custom", name: status, renderItem: renderBars, data: perStatus[i],
        encode: { x: [0, 1], y: 2 }, itemStyle: { color: COLORS[status] || "#999" },
        progressive: 0, animation: false, silent: true, z: 2
      };
    });
    var timeAxis = axis === "time";
    series.push({
      type: "custom", name: "executions", renderItem: renderMark, animation: false, silent: true,
      data: d.marks.map(function (m) { return { name: m[0], value: [timeAxis ? m[1] : m[2], 0] }; }),
      encode: { x: 0, y: 1 }, z: 1, itemStyle: { color: "#666" }
    });
    var last = timeAxis ? d.end : d.last_seq;
    return {
      animation: false,
      legend: { top: 0, data: d.statuses.concat(["executions"]), selected: hiddenMap() },
      grid: { left: 190, right: 30, top: 40, bottom: 70 },
      xAxis: {
        type: "value", min: timeAxis ? 0 : 0.5, max: timeAxis ? Math.max(last, 0.001) : last + 0.5,
        name: timeAxis ? "seconds since the run started" : "journal row (seq)", nameLocation: "middle",
        nameGap: 25, axisLabel: { hideOverlap: true }
      },
      yAxis: {
        type: "category", inverse: true,
        data: d.lanes.map(function (l, i) { return l + " (" + perLane[i] + ")"; })
      },
      // filterMode "none": every bar stays in its series; renderBars draws the ones in view.
      dataZoom: [
        { type: "slider", xAxisIndex: 0, filterMode: "none", bottom: 10 },
        { type: "inside", xAxisIndex: 0, filterMode: "none" }
      ],
      series: series
    };
  }

  function hiddenMap() {
    var out = {};
    Object.keys(hidden).forEach(function (k) { if (hidden[k]) { out[k] = false; } });
    return out;
  }

  // The bar under pixel (px, py) of the chart, or -1: the narrowest one there (with a margin of
  // a few pixels around a thin bar).
  function barAt(px, py) {
    if (!chart.containPixel({ gridIndex: 0 }, [px, py])) { return -1; }
    var f = frame(function (v) { return chart.convertToPixel({ gridIndex: 0 }, v); });
    var best = -1;
    var bestWidth = Infinity;
    for (var s = 0; s < perStatus.length; s++) {
      if (hidden[got.statuses[s]]) { continue; }
      var items = perStatus[s];
      for (var i = 0; i < items.length; i++) {
        var r = rectOf(f, items[i]);
        if (py < r[1] || py > r[1] + r[3]) { continue; }
        var slack = r[2] < 6 ? 3 : 0;
        if (px >= r[0] - slack && px <= r[0] + r[2] + slack && r[2] < bestWidth) {
          best = items[i][3];
          bestWidth = r[2];
        }
      }
    }
    return best;
  }

  function markAt(px) {
    var f = frame(function (v) { return chart.convertToPixel({ gridIndex: 0 }, v); });
    for (var i = got.marks.length - 1; i >= 0; i--) {
      var x = f.ax + f.kx * (axis === "time" ? got.marks[i][1] : got.marks[i][2]);
      if (Math.abs(x - px) <= 3) { return i; }
    }
    return -1;
  }

  function describe(n) {
    var b = got.bars[n];
    return got.names[b[cols.name]] + " (step " + b[cols.step] + ", " + got.statuses[b[cols.status]] + ")\n" +
      "rows " + b[cols.first_seq] + " to " + b[cols.last_seq] + ", +" + b[cols.start] + "s to +" +
      b[cols.end] + "s\nclick for its rows";
  }

  // The tip follows the pointer: plain text in a div of its own (textContent, no markup).
  function showTip(e) {
    var n = barAt(e.offsetX, e.offsetY);
    var m = n < 0 ? markAt(e.offsetX) : -1;
    if (n < 0 && m < 0) { tip.style.display = "none"; chart.getZr().setCursorStyle("default"); return; }
    tip.textContent = n >= 0 ? describe(n) :
      got.marks[m][0] + " at +" + got.marks[m][1] + "s (row " + got.marks[m][2] + "): " + got.marks[m][3];
    tip.style.display = "block";
    tip.style.left = Math.min(e.offsetX + 14, box.clientWidth - 320) + "px";
    tip.style.top = (e.offsetY + 14) + "px";
    chart.getZr().setCursorStyle(n >= 0 ? "pointer" : "default");
  }

  function makeTip() {
    var el = document.createElement("div");
    el.id = "timeline-tip";
    var s = el.style;
    s.position = "absolute"; s.display = "none"; s.pointerEvents = "none"; s.zIndex = "10";
    s.background = "#fff"; s.border = "1px solid #889"; s.borderRadius = "4px"; s.padding = "4px 8px";
    s.font = "12px system-ui, sans-serif"; s.whiteSpace = "pre"; s.maxWidth = "320px";
    s.boxShadow = "0 1px 4px rgba(0,0,0,.2)";
    return el;
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
    d.bar_columns.forEach(function (c, i) { cols[c] = i; });
    if (window.performance && performance.mark) { performance.mark("timeline-data"); }
    box.style.height = (160 + 48 * d.lanes.length) + "px";
    box.style.width = "100%";
    box.style.position = "relative";
    chart = echarts.init(box, null, { renderer: "canvas" });
    tip = makeTip();
    box.appendChild(tip);
    chart.on("finished", function ready() {
      chart.off("finished", ready);
      box.setAttribute("data-bars", String(d.bars.length));
      view.setAttribute("data-ready", "1");
      if (window.performance && performance.mark) { performance.mark("timeline-ready"); }
    });
    chart.on("legendselectchanged", function (e) {
      Object.keys(e.selected).forEach(function (k) { hidden[k] = !e.selected[k]; });
    });
    var zr = chart.getZr();
    zr.on("click", function (e) {
      var n = barAt(e.offsetX, e.offsetY);
      if (n >= 0) { showRows(n); }
    });
    zr.on("mousemove", showTip);
    zr.on("globalout", function () { tip.style.display = "none"; });
    chart.setOption(option(d));
    view.setAttribute("data-last-seq", String(d.last_seq));
    window.addEventListener("resize", function () { chart.resize(); });
    follow();
  }

  // A run still going (or waiting for a person) is fetched again every few seconds and redrawn
  // when its journal grew; the zoom stays where the person put it.
  var LIVE = { pending: 1, running: 1, suspended: 1, paused: 1, needs_attention: 1 };
  var EVERY = 3000;

  function follow() {
    if (!LIVE[got.status]) { return; }
    setTimeout(function () {
      fetch(src, { credentials: "same-origin", cache: "no-store" })
        .then(function (r) { return r.json(); })
        .then(function (d) {
          if (!d.error && (d.last_seq !== got.last_seq || d.status !== got.status)) {
            got = d;
            chart.setOption(option(d));
            view.setAttribute("data-last-seq", String(d.last_seq));
          }
          follow();
        })
        .catch(follow);
    }, EVERY);
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
  views.load(function (d) { if (d.error) { failed(d.error); } else { draw(d); } }, failed);
})();
