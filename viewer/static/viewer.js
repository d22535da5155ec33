// Click a header of a table with class "sortable" to sort its rows (this page only); click again to reverse.
// Cells may carry data-sort with the value to sort by. Everything else in the viewer works without JavaScript.
(function () {
  "use strict";
  function value(cell) {
    var raw = cell.getAttribute("data-sort");
    if (raw === null) raw = cell.textContent.trim();
    var n = parseFloat(raw);
    return isNaN(n) || !/^[-+]?[0-9.]/.test(raw) ? raw.toLowerCase() : n;
  }
  function sort(table, index, th) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var asc = th.getAttribute("aria-sort") !== "ascending";
    rows.sort(function (a, b) {
      var x = value(a.cells[index]), y = value(b.cells[index]);
      if (typeof x !== typeof y) { x = String(x); y = String(y); }
      return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(th.parentNode.cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("table.sortable").forEach(function (table) {
      if (!table.tHead || !table.tBodies.length) return;
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, index) {
        th.classList.add("sort");
        th.addEventListener("click", function (event) {
          if (event.target.tagName === "A") return;
          sort(table, index, th);
        });
      });
    });
  });
})();
