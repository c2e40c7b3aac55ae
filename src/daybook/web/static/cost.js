// The cost view: per quantity (usd, tokens, ...) the run's spend accumulated over its steps,
// the cap in force (a step line: a raise moves it) and each model's share, from
// /api/views/cost. Labels and tooltips are canvas text.
(function () {
  "use strict";
  var views = window.daybookViews;
  if (!views || !views.root || !window.echarts) { return; }

  function extend(points, last) {
    // A cap holds from where it was set to the run's last charged step.
    if (!points.length) { return points; }
    var out = points.slice();
    var tail = out[out.length - 1];
    if (tail[0] < last) { out.push([last, tail[1]]); }
    return out;
  }

  function draw(found) {
    var charts = views.root.querySelectorAll("[data-quantity]");
    Array.prototype.forEach.call(charts, function (el) {
      var q = el.getAttribute("data-quantity");
      var s = found.series[q];
      if (!s) { return; }
      el.style.height = "320px";
      var last = 0;
      s.spent.forEach(function (p) { last = Math.max(last, p[0]); });
      var series = [{
        name: q + " spent", type: "line", step: "end", data: s.spent, symbolSize: 6,
        lineStyle: { width: 3 }, areaStyle: { opacity: 0.08 }
      }];
      if (s.cap.length) {
        series.push({
          name: q + " cap", type: "line", step: "end", data: extend(s.cap, last), symbol: "none",
          lineStyle: { type: "dashed", width: 2, color: "#c23531" }, itemStyle: { color: "#c23531" }
        });
      }
      // A step whose model call was made again (re-spent): marked on the spend line.
      var again = (found.respent || []).map(function (r) {
        var at = 0;
        s.spent.forEach(function (p) { if (p[0] <= r.step) { at = p[1]; } });
        return [r.step, at];
      });
      if (again.length) {
        series.push({
          name: "made again", type: "scatter", data: again, symbol: "triangle", symbolSize: 14,
          itemStyle: { color: "#e6a23c" }, z: 5
        });
      }
      Object.keys(s.models).sort().forEach(function (m) {
        series.push({ name: m, type: "line", step: "end", data: s.models[m], symbolSize: 4, lineStyle: { width: 1 } });
      });
      views.chart(el, {
        animation: false,
        title: { text: q + " spent over steps" + (s.cap.length ? " against its cap" : ""), textStyle: { fontSize: 13 } },
        tooltip: views.tooltip(function (items) {
          return items.map(function (p) {
            return p.seriesName + ": " + p.value[1] + " (step " + p.value[0] + ")";
          }).join("\n");
        }, { trigger: "axis" }),
        legend: { top: 22, data: series.map(function (x) { return x.name; }) },
        grid: { top: 60, left: 70, right: 30, bottom: 40 },
        xAxis: { type: "value", name: "step", minInterval: 1 },
        yAxis: { type: "value", name: q },
        series: series
      });
    });
    views.ready();
  }

  views.load(draw, views.failure("the chart"));
}());
