(function () {
  "use strict";
  function sortValue(cell, numeric) {
    var raw = cell.getAttribute("data-sort");
    if (raw === null || raw === "") { return null; }
    if (!numeric) { return raw; }
    var x = Number(raw);
    return isNaN(x) ? null : x;
  }
  function sortTable(table, th) {
    var column = th.cellIndex;
    var numeric = th.getAttribute("data-sort-type") === "num";
    var direction = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    var sign = direction === "ascending" ? 1 : -1;
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = sortValue(a.cells[column], numeric), y = sortValue(b.cells[column], numeric);
      if (x === null || y === null) { return (x === null) - (y === null); }
      if (numeric) { return sign * (x - y); }
      return sign * x.localeCompare(y, undefined, {numeric: true, sensitivity: "base"});
    });
    rows.forEach(function (row) { body.appendChild(row); });
    Array.prototype.forEach.call(th.parentNode.cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", direction);
  }
  document.querySelectorAll("table.sortable th[data-sort-type]").forEach(function (th) {
    var table = th.closest("table");
    th.tabIndex = 0;
    th.addEventListener("click", function () { sortTable(table, th); });
    th.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); sortTable(table, th); }
    });
  });
  document.querySelectorAll(".fig-frame").forEach(function (frame) {
    frame.addEventListener("click", function () { frame.classList.toggle("full"); });
  });
}());
