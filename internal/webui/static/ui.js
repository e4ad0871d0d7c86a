// Enhancements only: every page works without this script. A run's page
// follows the run's event stream, recolouring its graph and reloading
// when a step starts or the run ends (not while a reply is being typed).
(function () {
  "use strict";
  function follow() {
    var main = document.getElementById("run");
    if (!main || !window.EventSource) return;
    var steps = main.dataset.steps;
    var es = new EventSource("/runs/" + encodeURIComponent(main.dataset.run) + "/events");
    es.addEventListener("snapshot", function (ev) {
      var s = JSON.parse(ev.data);
      var badge = document.getElementById("run-status");
      if (badge) { badge.textContent = s.status; badge.className = "badge st-" + s.status; }
      Object.keys(s.nodes).forEach(function (id) {
        var g = document.getElementById("node-" + id);
        if (!g) return;
        g.setAttribute("data-status", s.nodes[id]);
        g.setAttribute("class", g.getAttribute("class").replace(/st-[a-z_]+/, "st-" + s.nodes[id]));
        var l = g.querySelector(".node-label");
        if (l) l.textContent = s.labels[id];
      });
      var el = document.activeElement;
      var typing = el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA");
      var ended = s.ended && main.dataset.ended !== "true";
      if (s.ended) es.close();
      if ((String(s.steps) !== steps || ended) && !typing) location.reload();
    });
  }
  document.addEventListener("DOMContentLoaded", follow);
})();
