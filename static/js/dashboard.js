// Dashboard enhancements kept out of the HTML so the CSP can forbid inline script.
// Click a column header to sort a statistics table; numbers sort numerically, "—" (undefined) last.
(function () {
  "use strict";

  function cellValue(row, index) {
    const text = (row.cells[index] ? row.cells[index].textContent : "").trim();
    const number = parseFloat(text.replace("−", "-"));
    return { text: text, number: Number.isNaN(number) || text.startsWith("—") ? null : number };
  }

  function sortTable(header) {
    const table = header.closest("table");
    const body = table && table.tBodies[0];
    if (!body) return;
    const index = Array.prototype.indexOf.call(header.parentNode.children, header);
    const ascending = header.getAttribute("aria-sort") !== "ascending";
    header.parentNode.querySelectorAll("th").forEach((th) => th.removeAttribute("aria-sort"));
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    const rows = Array.from(body.rows);
    rows.sort((a, b) => {
      const x = cellValue(a, index);
      const y = cellValue(b, index);
      if (x.number === null && y.number === null) return ascending ? x.text.localeCompare(y.text) : y.text.localeCompare(x.text);
      if (x.number === null) return 1;
      if (y.number === null) return -1;
      return ascending ? x.number - y.number : y.number - x.number;
    });
    rows.forEach((row) => body.appendChild(row));
  }

  document.addEventListener("click", (event) => {
    const header = event.target instanceof Element ? event.target.closest("table.sortable thead th") : null;
    if (header) sortTable(header);
  });
})();
