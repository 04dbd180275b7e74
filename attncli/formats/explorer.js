// numbers.fixed's rule (attncli/document/numbers.py), so the page shows the digits every table shows: a number within
// round-off of a decimal half (core.rounding's tolerances, given in the data) rounds away from zero, on every CPU; toFixed
// alone rounds the binary value, which puts 0.285 (0.28499…) at 0.28 here and 0.29 there.
function attncliFixed(x, precision, tie, tieMost) {
  const y = Math.abs(x) * Number("1e" + precision), whole = Math.floor(y);
  let text = x.toFixed(precision);
  if (Math.abs(y - whole - 0.5) <= Math.min(tieMost, Math.max(y, 1) * tie)) {
    const digits = String(whole + 1).padStart(precision + 1, "0");
    text = (x < 0 ? "-" : "") + (precision ? digits.slice(0, -precision) + "." + digits.slice(-precision) : digits);
  }
  return /^-[0.]*$/.test(text) ? text.slice(1) : text;
}

(function () {
  const data = JSON.parse(document.getElementById("attncli-data").textContent);
  const fixed = (w) => attncliFixed(w, data.precision, data.tie, data.tie_most);
  const cell = () => getComputedStyle(document.documentElement).getPropertyValue("--cell").trim();
  const shade = (w) => `rgba(${cell()}, ${Math.max(0, Math.min(1, w)).toFixed(3)})`;
  const ink = (w) => (w > 0.55 ? "#ffffff" : "");
  const el = (tag, attrs, text) => { const e = document.createElement(tag); Object.assign(e, attrs || {}); if (text !== undefined) e.textContent = text; return e; };
  const grid = document.getElementById("grid");
  const layerSelect = document.getElementById("layer"), headSelect = document.getElementById("head");
  let selected = null;

  grid.style.gridTemplateColumns = `auto repeat(${data.heads}, 36px)`;
  grid.appendChild(el("span", { className: "label" }, ""));
  for (let h = 1; h <= data.heads; h++) grid.appendChild(el("span", { className: "label" }, "H" + h));
  for (let l = 0; l < data.layers; l++) {
    const layer = data.first_layer + l;
    grid.appendChild(el("span", { className: "label" }, "L" + layer));
    layerSelect.appendChild(el("option", { value: String(layer) }, String(layer)));
    for (let h = 0; h < data.heads; h++) {
      const button = el("button", { className: "head", title: data.tips[l][h] });
      button.dataset.layer = String(layer); button.dataset.head = String(h + 1);
      button.setAttribute("aria-label", `layer ${layer} head ${h + 1}`);
      const canvas = el("canvas"); const m = data.weights[l][h]; canvas.width = m.length; canvas.height = m.length;
      button.appendChild(canvas); grid.appendChild(button);
      button.addEventListener("click", () => open(layer, h + 1));
    }
  }
  for (let h = 1; h <= data.heads; h++) headSelect.appendChild(el("option", { value: String(h) }, String(h)));
  layerSelect.addEventListener("change", () => open(+layerSelect.value, +headSelect.value));
  headSelect.addEventListener("change", () => open(+layerSelect.value, +headSelect.value));

  function paint() {
    for (const button of grid.querySelectorAll("button.head")) {
      const m = data.weights[+button.dataset.layer - data.first_layer][+button.dataset.head - 1];
      const ctx = button.firstChild.getContext("2d"); ctx.clearRect(0, 0, m.length, m.length);
      m.forEach((row, i) => row.forEach((w, j) => { ctx.fillStyle = shade(w); ctx.fillRect(j, i, 1, 1); }));
    }
  }

  function sentence(weights, query, seen) {
    const box = document.getElementById("sentence"); box.replaceChildren();
    data.tokens.forEach((token, j) => {
      const w = weights ? weights[j] : 0, hidden = weights && seen && !seen[j];
      const shown = hidden ? "–" : fixed(w);
      const span = el("span", { title: weights ? `${token}: ${hidden ? "hidden by the mask" : shown}` : token }, token);
      span.dataset.weight = weights ? shown : "";
      if (weights && !hidden) { span.style.background = shade(w); span.style.color = ink(w); }
      if (j === query) span.className = "query";
      box.appendChild(span);
    });
  }

  function open(layer, head) {
    selected = [layer, head];
    layerSelect.value = String(layer); headSelect.value = String(head);
    for (const b of grid.querySelectorAll("button.head")) b.classList.toggle("selected", +b.dataset.layer === layer && +b.dataset.head === head);
    const m = data.weights[layer - data.first_layer][head - 1];
    const labels = data.exact ? data.tokens : m.map((_, i) => `block ${i + 1}`);
    const table = el("table", { className: "matrix", id: "matrix" });
    table.appendChild(el("caption", {}, `Layer ${layer}, head ${head}: rows are queries, columns keys`));
    const top = el("tr"); top.appendChild(el("th", {}, ""));
    labels.forEach((t) => top.appendChild(el("th", { scope: "col" }, t)));
    table.appendChild(top);
    const seen = data.seen ? data.seen[layer - data.first_layer] : null;  // a cell the mask hides is "–", as in every table
    m.forEach((row, i) => {
      const tr = el("tr"); tr.appendChild(el("th", { scope: "row" }, labels[i]));
      row.forEach((w, j) => {
        const hidden = seen && !seen[i][j];
        const td = el("td", hidden ? { className: "masked", title: "hidden by the mask" } : {}, hidden ? "–" : fixed(w));
        if (!hidden) { td.style.background = shade(w); td.style.color = ink(w); }
        tr.appendChild(td);
      });
      tr.addEventListener("mouseenter", () => { if (data.exact) sentence(row, i, seen && seen[i]); });
      table.appendChild(tr);
    });
    document.getElementById("matrix-box").replaceChildren(table);
    document.getElementById("tip").textContent = data.tips[layer - data.first_layer][head - 1];
    sentence(null, -1);
  }

  const readings = document.getElementById("readings");
  data.readings.forEach((r) => { const li = el("li", {}, r.text + " "); if (r.command) li.appendChild(el("code", {}, r.command)); readings.appendChild(li); });
  document.getElementById("theme").addEventListener("click", () => {
    const root = document.documentElement;
    const dark = root.dataset.theme ? root.dataset.theme === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
    root.dataset.theme = dark ? "light" : "dark"; paint(); if (selected) open(selected[0], selected[1]);
  });
  paint(); sentence(null, -1); open(data.first_layer, 1);
})();
