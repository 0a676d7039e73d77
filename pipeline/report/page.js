// The report page's script (pipeline/report/html.py writes it into the page): sort a table
// by a click on a header, keep the rows that hold every word typed in its box, colour cells
// by value, and say on hover which commands make a cell's number again.
"use strict";
(function () {
  const commands = JSON.parse(document.getElementById("run-commands").textContent);
  const rebuild = document.body.dataset.rebuild || "";
  const collator = new Intl.Collator("en", { numeric: true, sensitivity: "base" });
  const NUMBER = /^[[(]?\s*([-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)/i;

  // A cell's sort key: its leading number, or its text; "-" and empty cells are missing.
  function key(td) {
    const text = td.textContent.trim();
    const found = NUMBER.exec(text);
    return { text: text, missing: text === "" || text === "-",
             num: found ? parseFloat(found[1]) : null };
  }

  function sortBy(table, column, th) {
    const body = table.tBodies[0];
    const dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    for (const h of table.tHead.rows[0].cells) h.removeAttribute("aria-sort");
    th.setAttribute("aria-sort", dir);
    const rows = Array.from(body.rows);
    const keys = rows.map((r) => key(r.cells[column]));
    const numeric = keys.every((k) => k.missing || k.num !== null);
    const order = rows.map((_, i) => i).sort((a, b) => {
      const ka = keys[a], kb = keys[b];
      if (ka.missing !== kb.missing) return ka.missing ? 1 : -1;  // missing last, both ways
      let c = ka.missing ? 0 : numeric ? ka.num - kb.num : collator.compare(ka.text, kb.text);
      if (dir === "descending") c = -c;
      return c || a - b;
    });
    const frag = document.createDocumentFragment();
    for (const i of order) frag.appendChild(rows[i]);
    body.appendChild(frag);
  }

  function filterRows(block, table, words) {
    let shown = 0;
    const rows = table.tBodies[0].rows;
    for (const row of rows) {
      if (row.dataset.text === undefined) {
        row.dataset.text = Array.from(row.cells, (c) => c.textContent).join(" \u2502 ")
          .toLowerCase();
      }
      const keep = words.every((w) => row.dataset.text.includes(w));
      row.hidden = !keep;
      if (keep) shown += 1;
    }
    const noun = rows.length === 1 ? " row" : " rows";
    block.querySelector(".count").textContent =
      (words.length ? shown + " of " : "") + rows.length + noun;
  }

  function colour(table, on) {
    const cells = [];
    for (const row of table.tBodies[0].rows) {
      for (let i = 1; i < row.cells.length; i += 1) {
        const k = key(row.cells[i]);
        row.cells[i].style.background = "";
        if (on && !k.missing && k.num !== null) cells.push([row.cells[i], k.num]);
      }
    }
    if (!cells.length) return;
    const values = cells.map((c) => c[1]);
    const lo = Math.min.apply(null, values), hi = Math.max.apply(null, values);
    for (const [td, v] of cells) {
      const t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
      td.style.background = "hsl(" + Math.round(220 - 170 * t) + ", 70%, " +
        Math.round(92 - 22 * t) + "%)";
    }
  }

  // The run a cell's number comes from: its row's label, its column's, or both (model~variant).
  function runOf(td) {
    const row = td.parentElement;
    const label = row.cells[0].textContent.replace("\u2020", "").trim();
    const head = td.closest("table").tHead.rows[0].cells[td.cellIndex].textContent.trim();
    for (const name of [label + "~" + head, label, head]) {
      if (Object.prototype.hasOwnProperty.call(commands, name)) return name;
    }
    return null;
  }

  for (const block of document.querySelectorAll(".block")) {
    const table = block.querySelector("table.data");
    const head = table.tHead.rows[0];
    for (const th of head.cells) {
      th.title = "sort by this column (click again: the other way)";
      th.addEventListener("click", () => sortBy(table, th.cellIndex, th));
    }
    const box = block.querySelector("input.filter");
    box.addEventListener("input", () => filterRows(
      block, table, box.value.toLowerCase().split(/\s+/).filter(Boolean)));
    const heat = block.querySelector("input.heat");
    heat.addEventListener("change", () => colour(table, heat.checked));
    if (table.classList.contains("result")) {
      table.tBodies[0].addEventListener("mouseover", (event) => {
        const td = event.target.closest("td");
        if (!td || td.dataset.explained) return;
        td.dataset.explained = "1";
        const run = runOf(td);
        if (run) {
          td.title = "made again by: " + commands[run] + (rebuild ? ", then " + rebuild : "");
        } else if (rebuild) {
          td.title = "made again by: " + rebuild;
        }
      });
    }
  }
})();
