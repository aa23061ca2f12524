// The site page's charts and its period switch.
//
// Every element with data-chart="<id>" is drawn with uPlot (vendor/uplot) from the JSON
// in <script id="<id>"> (imports/sitepage/display.chart): clicks and impressions on axes
// of their own, position on a third one, inverted so that 1 is at the top. Rows covering
// a period are drawn as steps held over it. Days are UTC dates, whatever the browser's zone.
// The charts are kept in window.sitePageCharts by id (the browser test reads them).
// Choosing a preset or a target submits the period form; changing a date selects Custom.
(function () {
  "use strict";

  var HEIGHT = 320;
  var COLORS = { clicks: "#1f6fb2", impressions: "#8e6cc2", position: "#d9770b" };

  function whole(v) {
    return v == null ? "—" : Math.round(v).toLocaleString("en-US");
  }

  function compact(u, splits) {
    return splits.map(function (v) {
      if (v == null) return "";
      if (Math.abs(v) >= 1e6) return +(v / 1e6).toFixed(1) + "M";
      if (Math.abs(v) >= 1e3) return +(v / 1e3).toFixed(1) + "k";
      return String(v);
    });
  }

  function options(data, width) {
    var steps = data.daily ? undefined : uPlot.paths.stepped({ align: 1 });

    function line(label, key, format) {
      return {
        label: label, scale: key, stroke: COLORS[key], width: 2, paths: steps,
        points: { show: data.x.length <= 45 },
        value: function (u, v) { return format(v); }
      };
    }

    return {
      width: width,
      height: HEIGHT,
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, position: { dir: -1 } },
      series: [
        { label: data.daily ? "Day" : "Period", value: function (u, v, si, i) { return i == null ? "—" : data.labels[i]; } },
        line("Clicks", "clicks", whole),
        line("Impressions", "impressions", whole),
        line("Position", "position", function (v) { return v == null ? "—" : v.toFixed(1); })
      ],
      axes: [
        {},
        { scale: "clicks", label: "Clicks", stroke: COLORS.clicks, values: compact, size: 60 },
        { scale: "impressions", label: "Impressions", side: 1, stroke: COLORS.impressions, values: compact,
          grid: { show: false }, size: 60 },
        { scale: "position", label: "Position", side: 1, stroke: COLORS.position, grid: { show: false }, size: 50 }
      ]
    };
  }

  function draw(el) {
    var source = document.getElementById(el.getAttribute("data-chart"));
    if (!source || typeof uPlot === "undefined") return null;
    var data = JSON.parse(source.textContent);
    var chart = new uPlot(options(data, el.clientWidth),
                          [data.x, data.clicks, data.impressions, data.position], el);
    window.addEventListener("resize", function () {
      chart.setSize({ width: el.clientWidth, height: HEIGHT });
    });
    return chart;
  }

  function periodForm(form) {
    var custom = form.querySelector('input[name="period"][value="custom"]');
    form.querySelectorAll('input[name="period"]').forEach(function (radio) {
      radio.addEventListener("change", function () {
        if (radio.value === "custom") {
          form.querySelector('input[name="from"]').focus();
        } else {
          form.submit();
        }
      });
    });
    form.querySelectorAll('input[type="date"]').forEach(function (input) {
      input.addEventListener("change", function () { custom.checked = true; });
    });
    var target = form.querySelector('select[name="target"]');
    if (target) target.addEventListener("change", function () { form.submit(); });
  }

  function start() {
    window.sitePageCharts = {};
    document.querySelectorAll("[data-chart]").forEach(function (el) {
      var chart = draw(el);
      if (chart) window.sitePageCharts[el.getAttribute("data-chart")] = chart;
    });
    var form = document.querySelector("[data-period-form]");
    if (form) periodForm(form);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
