"""The interactive page's style and its one short script (see :mod:`phenoica.report._interactive`).

The script draws nothing itself: plotly draws every plot. It wires plotly's click events to the
gene panel, loads a gene's panel data from its asset file on first use (a script tag that calls
``phenoicaShard``), renders the panel's tables with DOM calls, draws the panel's guide-across-
variants plot with ``Plotly.newPlot``, and filters and sorts the hit table.
"""

PAGE_CSS = (
    "body{font-family:sans-serif;max-width:1300px;margin:auto;padding:0 1em;line-height:1.4}"
    "table.tbl{border-collapse:collapse;margin:0.5em 0;font-size:0.9em}"
    ".tbl td,.tbl th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}"
    ".tbl th{background:#f4f4f4;cursor:pointer;position:sticky;top:0}"
    ".scroll{max-width:100%;max-height:480px;overflow:auto;border:1px solid #eee}"
    "p.note{color:#444;font-size:0.9em}.panel{border:2px solid #1f77b4;padding:0.5em 1em;margin:1em 0}"
    "a.gene{color:#1f77b4;cursor:pointer;text-decoration:underline}.controls{margin:0.5em 0}"
    "img.gallery{max-width:100%;border:1px solid #ccc}"
)

PAGE_JS = r"""
(function () {
  "use strict";
  var DATA = null, shards = {}, pending = null, current = null, sortCol = null, sortDir = 1;
  function data() {
    if (!DATA) { DATA = JSON.parse(document.getElementById("phenoica-data").textContent); }
    return DATA;
  }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) { e.textContent = text; }
    return e;
  }
  function fmt(v) {
    if (v === null || v === undefined) { return ""; }
    if (typeof v === "number") { return Math.abs(v) < 1e-3 && v !== 0 ? v.toExponential(1) : String(+v.toPrecision(3)); }
    return String(v);
  }
  // Names are drawn by plotly as text only when written as entities (plotly_text in Python,
  // escapeText here); a clicked point's name is read back from them.
  var ENTITIES = {"&amp;": "&", "&lt;": "<", "&gt;": ">"};
  function unescapeText(s) {
    return String(s).replace(/&(amp|lt|gt);/g, function (m) { return ENTITIES[m]; });
  }
  function escapeText(s) {
    return String(s).replace(/[&<>]/g, function (c) { return {"&": "&amp;", "<": "&lt;", ">": "&gt;"}[c]; });
  }
  function geneLink(name) {
    var a = el("a", {"class": "gene", "data-gene": name}, name);
    a.addEventListener("click", function () { showGene(name); });
    return a;
  }
  function table(cols, rows, linkCol) {
    var t = el("table", {"class": "tbl"}), head = el("tr");
    cols.forEach(function (c) { head.appendChild(el("th", {}, c)); });
    t.appendChild(el("thead")).appendChild(head);
    var body = t.appendChild(el("tbody"));
    rows.forEach(function (r) {
      var tr = body.appendChild(el("tr"));
      r.forEach(function (v, i) {
        var td = tr.appendChild(el("td"));
        if (i === linkCol && v) { td.appendChild(geneLink(v)); } else { td.textContent = fmt(v); }
      });
    });
    var box = el("div", {"class": "scroll"});
    box.appendChild(t);
    return box;
  }
  window.phenoicaShard = function (k, genes) {
    shards[k] = genes;
    if (pending !== null && Math.floor(data().genes.indexOf(pending) / data().shard_size) === k) {
      var g = pending; pending = null; render(g, genes[g]);
    }
  };
  function showGene(name) {
    var i = data().genes.indexOf(name);
    var panel = document.getElementById("gene-panel");
    if (i < 0) { panel.textContent = "No data for gene " + name + "."; return; }
    var k = Math.floor(i / data().shard_size);
    if (shards[k]) { render(name, shards[k][name]); return; }
    pending = name;
    var s = el("script", {"src": data().assets + "/genes_" + String(k).padStart(4, "0") + ".js"});
    document.head.appendChild(s);
  }
  window.phenoicaShowGene = showGene;
  function render(name, rec) {
    current = name;
    var panel = document.getElementById("gene-panel"), keys = data().keys;
    panel.innerHTML = "";
    panel.appendChild(el("h2", {"id": "gene-panel-title"}, "Gene " + name));
    panel.appendChild(el("h3", {}, "Guides"));
    var gcols = data().guide_cols, ai = gcols.indexOf("auroc");
    panel.appendChild(table(gcols, rec.guides));
    var batches = Array.from(new Set(rec.folds.map(function (r) { return r[3]; }))).sort();
    data().fold_cols.slice(4).forEach(function (measure, m) {
      var byGuide = {};
      rec.folds.forEach(function (r) {
        var key = r[0] + "|" + r[1] + "|" + r[2];
        if (!byGuide[key]) { byGuide[key] = [r[0], r[1], r[2]].concat(batches.map(function () { return null; })); }
        byGuide[key][3 + batches.indexOf(r[3])] = r[4 + m];
      });
      panel.appendChild(el("h3", {}, (measure === "auroc" ? "AUROC" : "Distance from the controls (control SDs)") +
        " per held-out batch"));
      panel.appendChild(table(["model", "variant", "guide"].concat(batches), Object.values(byGuide)));
    });
    var plot = el("div", {"id": "gene-variants-plot"});
    panel.appendChild(el("h3", {}, "Its guides across variants"));
    panel.appendChild(plot);
    var traces = {};
    rec.guides.forEach(function (r) {
      var t = r[0] + " " + r[2];
      if (!traces[t]) { traces[t] = {x: [], y: [], name: escapeText(t), mode: "lines+markers", type: "scatter"}; }
      traces[t].x.push(r[1]); traces[t].y.push(r[ai]);
    });
    Plotly.newPlot(plot, Object.values(traces), {height: 300, margin: {t: 10}, yaxis: {title: {text: "AUROC"}},
      template: "plotly_white"}, {responsive: true});
    var pick = el("select", {"id": "panel-key"});
    keys.forEach(function (k) { pick.appendChild(el("option", {"value": k}, k)); });
    var mapBox = el("div");
    panel.appendChild(el("h3", {}, "Nearest genes in the map and known relationships"));
    panel.appendChild(pick);
    panel.appendChild(mapBox);
    function drawMap() {
      var kv = pick.value.split("/"), m = kv[0], v = kv.slice(1).join("/");
      var nb = rec.neighbors.filter(function (r) { return r[0] === m && r[1] === v; });
      var cos = {};
      nb.forEach(function (r) { cos[r[3]] = r[4]; });
      mapBox.innerHTML = "";
      mapBox.appendChild(nb.length ? table(["rank", "gene", "cosine", "q"], nb.map(function (r) { return r.slice(2); }), 1)
        : el("p", {}, "No map neighbours for this model/variant."));
      var known = rec.known.map(function (r) {
        return [r[0], r[1], r[1] in cos ? "yes" : "no", r[1] in cos ? cos[r[1]] : null];
      });
      mapBox.appendChild(known.length ? table(["source", "partner", "recalled (among nearest)", "cosine"], known, 1)
        : el("p", {}, "No known relationship of this gene in the annotation sources."));
    }
    pick.addEventListener("change", drawMap);
    drawMap();
    panel.appendChild(el("h3", {}, "Gallery"));
    if (rec.gallery) {
      panel.appendChild(el("img", {"class": "gallery", "id": "gene-gallery", "src": rec.gallery, "alt": "gallery of " + name}));
    } else {
      panel.appendChild(el("p", {}, rec.gallery_status || "No gallery panel for this gene (not a hit and not requested)."));
    }
    panel.scrollIntoView();
  }
  window.phenoicaClickable = function (id) {
    var gd = document.getElementById(id);
    gd.on("plotly_click", function (ev) {
      var p = ev.points[0], name = p.text !== undefined ? p.text : p.data.text[p.pointIndex];
      if (name) { showGene(unescapeText(name)); }
    });
  };
  function drawTable() {
    var t = data().table, cols = t.cols, gi = cols.indexOf("Metadata_Gene"), hi = cols.indexOf("hit");
    var text = document.getElementById("table-filter").value.toLowerCase();
    var key = document.getElementById("table-key").value, hitsOnly = document.getElementById("table-hits").checked;
    var rows = t.rows.filter(function (r) {
      return (!text || String(r[gi]).toLowerCase().indexOf(text) >= 0) && (!key || r[0] + "/" + r[1] === key) &&
        (!hitsOnly || r[hi] === true);
    });
    if (sortCol !== null) {
      rows.sort(function (a, b) {
        var x = a[sortCol], y = b[sortCol];
        if (x === y) { return 0; }
        if (x === null) { return 1; }
        if (y === null) { return -1; }
        return (x < y ? -1 : 1) * sortDir;
      });
    }
    var body = document.querySelector("#hit-table tbody");
    body.innerHTML = "";
    rows.slice(0, data().table_rows).forEach(function (r) {
      var tr = body.appendChild(el("tr"));
      r.forEach(function (v, i) {
        var td = tr.appendChild(el("td"));
        if (i === gi) { td.appendChild(geneLink(v)); } else { td.textContent = fmt(v); }
      });
    });
    document.getElementById("table-count").textContent = rows.length + " rows match";
  }
  document.addEventListener("DOMContentLoaded", function () {
    var t = data().table, head = el("tr");
    t.cols.forEach(function (c, i) {
      var th = el("th", {"data-col": c}, c);
      th.addEventListener("click", function () { sortDir = sortCol === i ? -sortDir : 1; sortCol = i; drawTable(); });
      head.appendChild(th);
    });
    document.querySelector("#hit-table thead").appendChild(head);
    var sel = document.getElementById("table-key");
    data().keys.forEach(function (k) { sel.appendChild(el("option", {"value": k}, k)); });
    ["table-filter", "table-key", "table-hits"].forEach(function (id) {
      document.getElementById(id).addEventListener(id === "table-filter" ? "input" : "change", drawTable);
    });
    drawTable();
  });
})();
"""
