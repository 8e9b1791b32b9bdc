// lwsflow dashboard: the one bit of page code besides htmx — show whether the live stream is up.
(function () {
  var badge = document.getElementById("live-state");
  function set(up) { if (badge) { badge.textContent = up ? "live" : "reconnecting…"; badge.className = up ? "live" : "live down"; } }
  document.body.addEventListener("htmx:sseOpen", function () { set(true); });
  document.body.addEventListener("htmx:sseError", function () { set(false); });
})();
