// Live updates of a run page: Server-Sent Events from /runs/RUN/events (rows already escaped
// by the server), appended to the timeline; the status badge follows the run. No framework.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || !window.EventSource) { return; }
  var run = live.getAttribute("data-run");
  var after = live.getAttribute("data-after") || "0";
  var body = document.querySelector("#timeline tbody");
  var source = new EventSource("/runs/" + run + "/events?after=" + encodeURIComponent(after));
  source.addEventListener("row", function (e) {
    var row = JSON.parse(e.data);
    var tr = document.createElement("tr");
    tr.className = "live-row";
    tr.setAttribute("data-seq", row.seq);
    tr.innerHTML = row.html;  // built by the server from escaped parts (web/html.py)
    if (body) { body.appendChild(tr); }
    live.setAttribute("data-after", row.seq);
  });
  var ended = { completed: 1, failed: 1, cancelled: 1, expired: 1 };
  source.addEventListener("status", function (e) {
    var st = JSON.parse(e.data);
    if (ended[st.status]) { source.close(); }  // the stream ends with the run: no reconnecting
    var badge = document.getElementById("run-status");
    if (badge) {
      badge.innerHTML = "";
      var span = document.createElement("span");
      span.className = "status s-" + st.status;
      span.textContent = st.status;
      badge.appendChild(span);
    }
  });
})();
