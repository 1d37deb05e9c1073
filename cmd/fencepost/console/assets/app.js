// fencepost console: live updates and confirmations. The pages work
// without it; with it, a change in the cluster redraws the page's main
// content within a second, and actions ask before they act.
"use strict";
(function () {
  var body = document.body;
  var main = document.getElementById("main");
  var status = document.getElementById("live");
  var task = body.dataset.task || "";
  var pending = false, inflight = false;

  function say(text) { if (status) status.textContent = text; }

  // refresh reads this page's main content again and swaps it in,
  // keeping focus and form values the user is typing into.
  function refresh() {
    if (inflight) { pending = true; return; }
    var active = document.activeElement;
    if (active && main.contains(active) && (active.tagName === "INPUT" || active.tagName === "SELECT")) {
      pending = true; setTimeout(flush, 1000); return;
    }
    inflight = true;
    var url = new URL(location.href);
    url.searchParams.set("fragment", "1");
    fetch(url, { headers: { "Accept": "text/html" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) { main.innerHTML = html; bind(); say("updated " + new Date().toLocaleTimeString()); })
      .catch(function () { say("update failed; retrying"); })
      .finally(function () { inflight = false; if (pending) { pending = false; setTimeout(refresh, 100); } });
  }
  function flush() { if (pending) { pending = false; refresh(); } }

  if (body.dataset.live === "true" && window.EventSource) {
    var es = new EventSource("/live");
    es.addEventListener("change", function (ev) {
      var m = {};
      try { m = JSON.parse(ev.data); } catch (e) { return; }
      if (m.reset || !task || (m.tasks || []).indexOf(task) >= 0) refresh();
    });
    es.onopen = function () { say("live"); };
    es.onerror = function () { say("reconnecting…"); };
  }

  var dialog = document.getElementById("confirm");
  // bind asks before every action form posts, then posts it with fetch
  // (the CSRF token in a header as well as the form) and lets the live
  // update show the result.
  function bind() {
    var forms = main.querySelectorAll("form[data-confirm]");
    Array.prototype.forEach.call(forms, function (f) {
      f.addEventListener("submit", function (ev) {
        ev.preventDefault();
        if (!dialog || typeof dialog.showModal !== "function") { f.submit(); return; }
        document.getElementById("confirm-text").textContent = f.dataset.confirm;
        dialog.returnValue = "";
        dialog.onclose = function () {
          if (dialog.returnValue !== "ok") return;
          var data = new URLSearchParams(new FormData(f));
          data.set("confirm", "yes");
          fetch(f.action, { method: "POST", body: data, credentials: "same-origin",
            headers: { "Accept": "application/json", "X-CSRF-Token": body.dataset.csrf } })
            .then(function (r) { return r.json().then(function (j) { return { ok: r.ok, j: j }; }); })
            .then(function (x) { say(x.ok ? "done: " + x.j.message : "refused: " + (x.j.detail || x.j.title)); refresh(); })
            .catch(function () { say("the action failed; reload the page"); });
        };
        dialog.showModal();
        document.getElementById("confirm-no").focus();
      });
    });
  }
  bind();
})();
