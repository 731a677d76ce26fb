// Offline filtering and sorting of the decisions index; no library, no network.
"use strict";
(function () {
  var table = document.getElementById("decisions");
  if (!table) {
    return;
  }
  var tbody = table.tBodies[0];
  var rows = Array.prototype.slice.call(tbody.rows);
  var filter = document.getElementById("filter");
  var status = document.getElementById("status-filter");
  var count = document.getElementById("shown-count");

  function apply() {
    var query = filter.value.trim().toLowerCase();
    var wanted = status.value;
    var shown = 0;
    rows.forEach(function (row) {
      var ok = (!query || row.dataset.search.indexOf(query) !== -1) &&
        (!wanted || row.dataset.status === wanted);
      row.hidden = !ok;
      if (ok) {
        shown += 1;
      }
    });
    count.textContent = shown + " of " + rows.length + " decisions shown";
  }

  table.querySelectorAll("th button[data-key]").forEach(function (button) {
    button.addEventListener("click", function () {
      var key = button.dataset.key;
      var numeric = button.dataset.type === "number";
      var header = button.parentElement;
      var ascending = header.getAttribute("aria-sort") !== "ascending";
      table.querySelectorAll("th").forEach(function (th) { th.removeAttribute("aria-sort"); });
      header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      rows.sort(function (a, b) {
        var x = a.dataset[key];
        var y = b.dataset[key];
        if (numeric) {
          x = Number(x);
          y = Number(y);
        }
        var order = x < y ? -1 : (x > y ? 1 : 0);
        return ascending ? order : -order;
      });
      rows.forEach(function (row) { tbody.appendChild(row); });
    });
  });
  filter.addEventListener("input", apply);
  status.addEventListener("change", apply);
  apply();
})();
