// The live part of a judge run's page polls every second. When a poll fails (the database or the broker is
// restarting, or the network is away), htmx keeps the last figures and goes on polling; this says so until a poll
// succeeds, when the swapped-in figures no longer carry the notice.
(function () {
  "use strict";
  function showOutage(event) {
    var target = event.detail && event.detail.elt;
    if (!target || target.id !== "run-progress") {
      return;
    }
    var notice = target.querySelector("[data-live-outage]");
    if (notice) {
      notice.hidden = false;
    }
  }
  document.addEventListener("htmx:responseError", showOutage);
  document.addEventListener("htmx:sendError", showOutage);
  document.addEventListener("htmx:timeout", showOutage);
})();
