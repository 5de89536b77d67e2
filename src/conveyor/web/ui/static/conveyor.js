// Conveyor web UI: local times, sortable tables, live refresh. The pages work without it.
(function () {
  "use strict";

  function localTimes(root) {
    root.querySelectorAll("time[data-ts]").forEach(function (node) {
      var moment = new Date(parseFloat(node.dataset.ts) * 1000);
      node.textContent = moment.toLocaleString([], { dateStyle: "short", timeStyle: "medium" });
      node.title = moment.toISOString();
    });
    root.querySelectorAll("svg text[data-ts]").forEach(function (node) {
      var moment = new Date(parseFloat(node.dataset.ts) * 1000);
      node.textContent = moment.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    });
  }

  function cellValue(row, index, numeric) {
    var cell = row.children[index];
    if (!cell) return numeric ? -Infinity : "";
    var raw = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
    if (!numeric) return raw.toLowerCase();
    var number = parseFloat(String(raw).replace(/[^0-9.eE+-]/g, ""));
    return isNaN(number) ? -Infinity : number;
  }

  function sortable(root) {
    root.querySelectorAll("table.sortable").forEach(function (table) {
      table.querySelectorAll("thead th").forEach(function (header, index) {
        header.addEventListener("click", function () {
          var ascending = header.getAttribute("aria-sort") !== "ascending";
          table.querySelectorAll("thead th").forEach(function (other) { other.removeAttribute("aria-sort"); });
          header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
          var numeric = header.dataset.type === "number";
          var body = table.tBodies[0];
          var rows = Array.prototype.slice.call(body.rows).filter(function (row) { return !row.querySelector("td.empty"); });
          rows.sort(function (a, b) {
            var x = cellValue(a, index, numeric), y = cellValue(b, index, numeric);
            return (x < y ? -1 : x > y ? 1 : 0) * (ascending ? 1 : -1);
          });
          rows.forEach(function (row) { body.appendChild(row); });
        });
      });
    });
  }

  function refresh(main) {
    var seconds = parseFloat(main.dataset.refresh);
    if (!seconds) return;
    var timer = window.setInterval(function () {
      if (document.hidden || main.querySelector("th[aria-sort]")) return; // keep a sort the user chose
      var active = document.activeElement;
      if (active && main.contains(active) && active.matches("input, select, textarea")) return; // typing
      if (main.querySelector("input[type=checkbox]:checked")) return; // a selection in progress
      fetch(window.location.href, { headers: { "X-Requested-With": "refresh" } })
        .then(function (response) { return response.ok ? response.text() : null; })
        .then(function (text) {
          if (!text) return;
          var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("content");
          if (!fresh) return;
          main.innerHTML = fresh.innerHTML;
          if (!fresh.dataset.refresh) window.clearInterval(timer); // the page is final (a finished redrive)
          localTimes(main);
          sortable(main);
          main.dataset.refreshedAt = String(Date.now());
        })
        .catch(function () { /* the next round tries again */ });
    }, seconds * 1000);
  }

  function confirmations(root) {
    root.addEventListener("submit", function (event) {
      var button = event.submitter || event.target.querySelector("[data-confirm]");
      var question = button && button.dataset ? button.dataset.confirm : null;
      if (question && !window.confirm(question)) event.preventDefault();
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    confirmations(document);
    var main = document.getElementById("content");
    localTimes(document);
    sortable(document);
    if (main) refresh(main);
    document.body.dataset.ready = "1";
  });
})();
