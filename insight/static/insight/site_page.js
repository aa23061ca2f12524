// The site page's charts and its period switch.
//
// Every element with data-chart="<id>" is drawn with uPlot (vendor/uplot) from the JSON
// in <script id="<id>"> (insight/sitepage/display.chart): clicks and impressions on axes
// of their own, position on a third one, inverted so that 1 is at the top. Rows covering
// a period are drawn as steps held over it. Days are UTC dates, whatever the browser's zone.
// The x axis ticks whole days (never hours: the data is daily), months or years.
// A "Show" choice above each chart (data-chart-metrics) shows one figure alone, or all;
// the legend's own toggles keep it in step.
// Notes (a dashed line at their day) and open alerts (a shaded band over their days) are drawn over the
// plot from the same JSON (notes, alerts), their text on hover or focus; the page lists them under the chart.
// The charts are kept in window.sitePageCharts by id (the browser test reads them).
// Choosing a preset or a target submits the period form; changing a date selects Custom.
(function () {
  "use strict";

  var HEIGHT = 320;
  var COLORS = { clicks: "#1f6fb2", impressions: "#8e6cc2", position: "#d9770b" };
  var DAY = 86400;
  // uPlot's own time steps from a day up (a month is 30 days, a year 365: it then steps by calendar).
  var DAY_INCRS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 30, 60, 90, 120, 180, 365, 730, 1825, 3650]
    .map(function (days) { return days * DAY; });
  var MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

  function dayTicks(u, splits, axisIdx, space, incr) {
    return splits.map(function (ts) {
      var d = new Date(ts * 1e3);  // days are UTC midnights
      if (incr >= 365 * DAY) return String(d.getUTCFullYear());
      if (incr >= 30 * DAY) return MONTHS[d.getUTCMonth()] + " " + d.getUTCFullYear();
      return MONTHS[d.getUTCMonth()] + " " + d.getUTCDate();
    });
  }

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

  // The marks are elements in uPlot's overlay (u.over: the plotting area), placed at valToPos of their days
  // after every redraw, so what the eye sees and what the browser test reads is the chart's own x.
  // Texts go in through textContent only: a note is an operator's words, never markup.
  function mark(kind, id, tipText, label) {
    var el = document.createElement("div");
    el.className = "chart-mark " + kind;
    el.setAttribute("data-" + kind + "-mark", String(id));
    var handle = el;
    if (kind === "alert") {  // the band lets the cursor through; its flag at the top takes the hover
      handle = document.createElement("span");
      handle.className = "chart-mark-flag";
      handle.textContent = "!";
      el.appendChild(handle);
    }
    handle.setAttribute("tabindex", "0");
    handle.setAttribute("aria-label", label);
    var tip = document.createElement("span");
    tip.className = "chart-mark-tip";
    tip.textContent = tipText;
    el.appendChild(tip);
    return el;
  }

  function marksPlugin(data) {
    var placed = null;

    function build(u) {
      var layer = document.createElement("div");
      layer.className = "chart-marks-layer";
      placed = [];
      (data.alerts || []).forEach(function (a) {
        var el = mark("alert", a.id, a.when + " · " + a.text, "Open alert, " + a.when + ": " + a.text);
        // Half a day either side: the band covers its first and last days' points, a one-day alert too.
        placed.push({ el: el, x0: a.x0 - DAY / 2, x1: a.x1 + DAY / 2 });
        layer.appendChild(el);
      });
      (data.notes || []).forEach(function (n) {
        var el = mark("note", n.id, n.day + " · " + n.text, "Note, " + n.day + ": " + n.text);
        placed.push({ el: el, x0: n.x, x1: null });
        layer.appendChild(el);
      });
      u.over.appendChild(layer);
    }

    function place(u) {
      if (placed === null) build(u);
      var width = u.over.clientWidth;
      placed.forEach(function (p) {
        var left = u.valToPos(p.x0, "x");
        if (p.x1 === null) {
          p.el.hidden = !(left >= -0.5 && left <= width + 0.5);  // a note outside the points' days
          p.el.style.left = left + "px";
        } else {
          var right = Math.min(width, u.valToPos(p.x1, "x"));
          left = Math.max(0, left);
          p.el.hidden = !(right > left);
          p.el.style.left = left + "px";
          p.el.style.width = Math.max(0, right - left) + "px";
        }
        p.el.classList.toggle("tip-left", left > width / 2);
      });
    }

    return { hooks: { draw: place } };
  }

  function options(data, width, onSeries) {
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
      hooks: { setSeries: [onSeries] },
      plugins: [marksPlugin(data)],
      scales: { x: { time: true }, position: { dir: -1 } },
      series: [
        { label: data.daily ? "Day" : "Period", value: function (u, v, si, i) { return i == null ? "—" : data.labels[i]; } },
        line("Clicks", "clicks", whole),
        line("Impressions", "impressions", whole),
        line("Position", "position", function (v) { return v == null ? "—" : v.toFixed(1); })
      ],
      axes: [
        { incrs: DAY_INCRS, values: dayTicks },
        { scale: "clicks", label: "Clicks", stroke: COLORS.clicks, values: compact, size: 60 },
        { scale: "impressions", label: "Impressions", side: 1, stroke: COLORS.impressions, values: compact,
          grid: { show: false }, size: 60 },
        { scale: "position", label: "Position", side: 1, stroke: COLORS.position, grid: { show: false }, size: 50 }
      ]
    };
  }

  // The "Show" choice: "all", or the scale key of the one series shown alone.
  function metricChoice(group) {
    var radios = group ? group.querySelectorAll("input[type=radio]") : [];
    function shown(u) {
      var on = u.series.slice(1).filter(function (s) { return s.show; });
      return on.length === u.series.length - 1 ? "all" : on.length === 1 ? on[0].scale : null;
    }
    return {
      bind: function (chart) {
        radios.forEach(function (radio) {
          radio.addEventListener("change", function () {
            chart.batch(function () {
              chart.series.forEach(function (s, i) {
                if (i > 0) chart.setSeries(i, { show: radio.value === "all" || s.scale === radio.value });
              });
            });
          });
        });
      },
      // After any toggle (the legend's too): the radio that says what is shown, none for a mix.
      sync: function (u) {
        var value = shown(u);
        radios.forEach(function (radio) { radio.checked = radio.value === value; });
      }
    };
  }

  function draw(el) {
    var id = el.getAttribute("data-chart");
    var source = document.getElementById(id);
    if (!source || typeof uPlot === "undefined") return null;
    var data = JSON.parse(source.textContent);
    var choice = metricChoice(document.querySelector('[data-chart-metrics="' + id + '"]'));
    var chart = new uPlot(options(data, el.clientWidth, choice.sync),
                          [data.x, data.clicks, data.impressions, data.position], el);
    choice.bind(chart);
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
