// Live progress for the Imports pages.
//
// Every element with data-job-url is a progress bar for one import's job: it polls
// GET /jobs/<id> every second until the job is done or failed, then updates the
// status badge, the counts ([data-count=read] …) and the error of the enclosing
// [data-import] element. A container marked data-reload-when-finished (the detail
// page) reloads instead, so the server renders the full report. A job the server calls
// stalled (job.stalled: no sign of life, or queued with no worker running) shows that
// sentence in its badge instead of its status, and no percentage.
(function () {
  "use strict";

  var POLL_MS = 1000;
  var LABELS = { queued: "Queued", running: "Running", done: "Done", failed: "Failed",
                 nothing_imported: "Nothing imported", mostly_skipped: "Mostly skipped" };
  // A done import that brought in nothing, or little, shows that (imports.outcomes.shown_status), never "Done".
  function shownStatus(job) {
    var outcome = (job.report || {}).outcome;
    return job.status === "done" && (outcome === "nothing_imported" || outcome === "mostly_skipped") ? outcome : job.status;
  }
  var COUNTS = ["read", "inserted", "updated", "skipped", "errors"];

  function number(n) {
    return typeof n === "number" ? n.toLocaleString("en-US") : "";
  }

  function setStatus(scope, status, stalled) {
    var badge = scope.querySelector("[data-status]");
    if (badge && stalled) {
      badge.className = "badge failed stalled";
      badge.setAttribute("data-stalled", "");
      badge.textContent = stalled;
    } else if (badge && LABELS[status]) {
      badge.className = "badge " + status;
      badge.removeAttribute("data-stalled");
      badge.textContent = LABELS[status];
    }
  }

  function setCounts(scope, counts) {
    if (!counts) return;
    COUNTS.forEach(function (name) {
      var cell = scope.querySelector('[data-count="' + name + '"]');
      if (cell && typeof counts[name] === "number") cell.textContent = number(counts[name]);
    });
  }

  function setBar(el, job) {
    var progress = job.progress || {};
    var done = progress.done, total = progress.total;
    var label = el.querySelector("[data-progress-label]");
    var bar = el.querySelector(".bar");
    if (job.stalled) {
      // The badge says why; a percentage would claim work nobody is doing.
      el.classList.add("indeterminate");
      el.removeAttribute("aria-valuenow");
      bar.style.width = "";
      label.textContent = "";
    } else if (typeof done === "number" && typeof total === "number" && total > 0) {
      var percent = Math.max(0, Math.min(100, Math.round((100 * done) / total)));
      el.classList.remove("indeterminate");
      el.setAttribute("aria-valuenow", String(percent));
      bar.style.width = percent + "%";
      label.textContent = percent + "% · " + number(done) + " / " + number(total) + " rows";
    } else if (job.status === "queued") {
      label.textContent = "Waiting for a worker…";
    } else {
      label.textContent = "Starting…";
    }
  }

  function finish(el, scope, job) {
    if (scope.hasAttribute("data-reload-when-finished")) {
      window.location.reload();
      return;
    }
    el.classList.add("ended");
    el.removeAttribute("aria-valuenow");
    setStatus(scope, shownStatus(job));
    var counts = job.status === "done" ? job.report : (job.progress || {}).counts;
    setCounts(scope, counts);
    var error = scope.querySelector("[data-error]");
    if (error && job.status === "failed") {
      error.textContent = (job.error || "failed").replace(/^ImportRejected: /, "");
    }
  }

  function watch(el) {
    var scope = el.closest("[data-import]") || document;
    var url = el.getAttribute("data-job-url");
    var failures = 0;

    function poll() {
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (response.status === 401 || response.status === 404) {
            throw Object.assign(new Error("gone"), { permanent: true });
          }
          if (!response.ok) throw new Error("HTTP " + response.status);
          return response.json();
        })
        .then(function (job) {
          failures = 0;
          if (job.status === "done" || job.status === "failed") {
            finish(el, scope, job);
            return;
          }
          setStatus(scope, job.status, job.stalled);
          setBar(el, job);
          setCounts(scope, (job.progress || {}).counts);
          window.setTimeout(poll, POLL_MS);
        })
        .catch(function (err) {
          var label = el.querySelector("[data-progress-label]");
          if (err.permanent) {
            label.textContent = "Progress unavailable — reload the page.";
            return;
          }
          // A restarting server or a network blip: keep trying, more slowly.
          failures += 1;
          label.textContent = "Reconnecting…";
          window.setTimeout(poll, Math.min(POLL_MS * Math.pow(2, failures), 15000));
        });
    }

    poll();
  }

  document.querySelectorAll("[data-job-url]").forEach(watch);
})();
