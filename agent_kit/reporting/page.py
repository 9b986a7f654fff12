"""The shared scaffolding of agent_kit's HTML pages (run report and run comparison).

One stylesheet, one static script (sortable tables, transcript filters) and the
Content-Security-Policy that allows exactly that script (by its SHA-256) and no fetch of any
kind, so a page is self-contained, works from ``file://`` and cannot run injected markup. Run
data is only ever placed in escaped markup and ``data-*`` attributes, never in the script.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Sequence
from typing import Any, Final

from agent_kit.reporting.transcripts import fmt, value_attr

__all__ = [
    "CSS",
    "SCRIPT",
    "cell",
    "csp_meta",
    "document",
    "esc",
    "section",
    "sortable_head",
    "table",
    "wide",
]

#: The pages' stylesheet (inline).
CSS: Final = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1f2328;
background:#fff;max-width:1240px}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:18px;margin:30px 0 8px;border-bottom:1px solid #d0d7de}
h3{font-size:15px;margin:16px 0 6px}
nav{margin:10px 0;font-size:13px}nav a{margin-right:12px;color:#0969da}
.muted{color:#656d76}.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{border:1px solid #d0d7de;border-radius:6px;padding:8px 14px;min-width:130px}
.card b{display:block;font-size:20px}table{border-collapse:collapse;margin:6px 0}
td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
th{background:#f6f8fa}code,.id{white-space:nowrap}pre code{white-space:inherit}
.wide{overflow-x:auto;max-width:100%;margin:6px 0}.wide>table{margin:0}
.plots{display:flex;flex-wrap:wrap;gap:16px}.plots svg{border:1px solid #eaeef2;
max-width:100%;height:auto}
pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;background:#f6f8fa;padding:6px}
details{margin:6px 0;border:1px solid #d0d7de;border-radius:6px;padding:4px 8px}
summary{cursor:pointer}.msg{margin:6px 0 6px 8px}.turn{border-left:3px solid #d0d7de;
margin:8px 0;padding-left:8px}.turn-head{font-size:12px;color:#656d76}
.last-result{border-left:3px solid #8250df;padding-left:8px;margin:8px 0}
.role{font-weight:600;font-size:12px;text-transform:uppercase;color:#0969da}
.warn{background:#fff8c5;border:1px solid #d4a72c;padding:6px 10px;border-radius:6px}
.banner{background:#ddf4ff;border:1px solid #54aeff;padding:6px 10px;border-radius:6px}
.ok{background:#dafbe1;border:1px solid #4ac26b;padding:6px 10px;border-radius:6px}
.badge{display:inline-block;border-radius:10px;padding:0 7px;font-size:12px;color:#fff;
background:#57606a}.b-succeeded{background:#1a7f37}.b-unsolved{background:#9a6700}
.b-floor{background:#8250df}.b-failed{background:#cf222e}.b-pending{background:#57606a}
.b-nograd{background:#6e7781}tr.novar td{background:#f6f8fa;color:#57606a}
button.sort{all:unset;cursor:pointer;font-weight:600}button.sort::after{content:" ⇅";color:#8c959f}
th[aria-sort=ascending] button.sort::after{content:" ▲"}
th[aria-sort=descending] button.sort::after{content:" ▼"}
button.show{all:unset;cursor:pointer;color:#0969da;text-decoration:underline}
.filters{position:sticky;top:0;background:#fff;padding:6px 0;border-bottom:1px solid #d0d7de;
display:flex;gap:16px;align-items:center;z-index:1}[hidden]{display:none!important}
tr.differs td{background:#fff8c5}
.gv-panes{display:flex;flex-wrap:wrap;gap:16px}.gv-pane{flex:1 1 420px;min-width:0}
.group-view tbody th{text-align:left;white-space:nowrap}
"""

#: The page's only script: sortable tables, the transcript filters, opening the transcript
#: a link or the address's ``#tx-ID`` points at, and the group view (showing the pre-rendered
#: block its selects name: :mod:`agent_kit.reporting.group_view`). Static text — no run
#: data is ever put in it (the page's data lives in escaped attributes) — and allowed by hash
#: in the page's Content-Security-Policy, so no other script can run.
SCRIPT: Final = """
(function () {
  "use strict";
  function value(cell) {
    var raw = cell ? cell.getAttribute("data-v") : null;
    if (raw === null || raw === "" || raw === "None") { return null; }
    var number = parseFloat(raw);
    return isNaN(number) ? null : number;
  }
  function sortBy(table, th, column) {
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    var heads = table.querySelectorAll("thead th");
    for (var i = 0; i < heads.length; i++) { heads[i].removeAttribute("aria-sort"); }
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var numeric = th.getAttribute("data-type") === "num";
    rows.sort(function (a, b) {
      var x = a.cells[column], y = b.cells[column], order = 0;
      if (numeric) {
        var p = value(x), q = value(y);
        if (p === null && q === null) { order = 0; }
        else if (p === null) { return 1; }
        else if (q === null) { return -1; }
        else { order = p - q; }
      } else {
        order = (x ? x.textContent : "").localeCompare(y ? y.textContent : "");
      }
      return ascending ? order : -order;
    });
    for (var j = 0; j < rows.length; j++) { body.appendChild(rows[j]); }
  }
  var tables = document.querySelectorAll("table.sortable");
  for (var t = 0; t < tables.length; t++) {
    (function (table) {
      var heads = table.querySelectorAll("thead th");
      for (var c = 0; c < heads.length; c++) {
        (function (th, column) {
          var button = th.querySelector("button.sort");
          if (!button) { return; }
          button.addEventListener("click", function () { sortBy(table, th, column); });
        })(heads[c], c);
      }
    })(tables[t]);
  }
  var prompt = document.getElementById("f-prompt");
  var outcome = document.getElementById("f-outcome");
  var count = document.getElementById("f-count");
  function apply() {
    var p = prompt ? prompt.value : "", o = outcome ? outcome.value : "";
    var items = document.querySelectorAll("details.tx"), shown = 0;
    for (var i = 0; i < items.length; i++) {
      var el = items[i], kind = el.getAttribute("data-outcome");
      var okPrompt = !p || el.getAttribute("data-prompt") === p;
      var rewarded = el.getAttribute("data-rewarded") === "1";
      var okOutcome = !o || kind === o || (o === "rewarded" && rewarded);
      el.hidden = !(okPrompt && okOutcome);
      if (!el.hidden) { shown++; }
    }
    if (count) { count.textContent = shown + " of " + items.length + " transcripts shown"; }
  }
  if (prompt) { prompt.addEventListener("change", apply); }
  if (outcome) { outcome.addEventListener("change", apply); }
  var shows = document.querySelectorAll("button.show[data-show-prompt]");
  for (var s = 0; s < shows.length; s++) {
    shows[s].addEventListener("click", function (event) {
      if (prompt) { prompt.value = event.currentTarget.getAttribute("data-show-prompt"); }
      if (outcome) { outcome.value = ""; }
      apply();
      var target = document.getElementById("transcripts");
      if (target && target.scrollIntoView) { target.scrollIntoView(); }
    });
  }
  apply();
  function openTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var target = id ? document.getElementById(id) : null;
    if (!target || target.tagName !== "DETAILS") { return; }
    target.hidden = false;
    target.open = true;
    if (target.scrollIntoView) { target.scrollIntoView(); }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  function groupView(view) {
    var pool = view.querySelector(".gv-pool");
    var prompts = view.querySelector("select.gv-prompt");
    var panes = view.querySelectorAll(".gv-pane");
    function show() {
      for (var i = 0; i < panes.length; i++) {
        var cell = panes[i].querySelector("select.gv-cell");
        var key = (cell ? cell.value + "|" : "") + (prompts ? prompts.value : "");
        var shown = panes[i].querySelector(".gv-shown"), found = null;
        for (var b = 0; pool && b < pool.children.length; b++) {
          if (pool.children[b].getAttribute("data-key") === key) { found = pool.children[b]; }
        }
        shown.textContent = "";
        if (found) { shown.appendChild(found.cloneNode(true)); }
        else { shown.textContent = "no rollout of this cell on this prompt"; }
      }
    }
    var selects = view.querySelectorAll("select");
    for (var s = 0; s < selects.length; s++) { selects[s].addEventListener("change", show); }
    var picks = document.querySelectorAll("button.show-group[data-group]");
    for (var p = 0; p < picks.length; p++) {
      picks[p].addEventListener("click", function (event) {
        if (prompts) { prompts.value = event.currentTarget.getAttribute("data-group"); }
        show();
        if (view.scrollIntoView) { view.scrollIntoView(); }
      });
    }
    show();
  }
  var views = document.querySelectorAll(".group-view");
  for (var v = 0; v < views.length; v++) { groupView(views[v]); }
})();
"""


def esc(value: Any) -> str:
    """HTML-escape any value (quotes too)."""
    return html.escape(str(value), quote=True)


def cell(cell: Any) -> str:
    """A ``<td>``: numbers right-aligned, formatted, with their exact value in ``data-v``."""
    numeric = isinstance(cell, (int, float)) or cell is None
    if numeric:
        return f'<td class="n"{value_attr(cell)}>{esc(fmt(cell))}</td>'
    return f"<td>{esc(cell)}</td>"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "") -> str:
    """A table with a header row, cells through :func:`cell`, in its scroller (:func:`wide`)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(cell(c) for c in row) + "</tr>" for row in rows)
    klass = f' class="{cls}"' if cls else ""
    return wide(f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def wide(table: str) -> str:
    """``table`` (markup) in its own horizontal scroller: a table wider than the page scrolls
    there instead of widening the page or breaking its numbers and ids."""
    return f'<div class="wide">{table}</div>'


def sortable_head(columns: Sequence[tuple[str, bool]]) -> str:
    """A ``<thead>`` whose headers sort the table on click: (name, numeric?) per column."""
    cells = "".join(
        f'<th data-type="{"num" if numeric else "text"}"><button type="button" class="sort">'
        f"{esc(name)}</button></th>"
        for name, numeric in columns
    )
    return f"<thead><tr>{cells}</tr></thead>"


def section(anchor: str, title: str, body: str) -> str:
    """A ``<section id=anchor>`` with an ``<h2>`` title."""
    return f'<section id="{anchor}"><h2>{esc(title)}</h2>{body}</section>'


def csp_meta(script: str = SCRIPT) -> str:
    """The Content-Security-Policy ``<meta>``: inline styles, this one script, nothing else."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    policy = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )
    return f'<meta http-equiv="Content-Security-Policy" content="{policy}">'


def document(title: str, parts: Sequence[str]) -> str:
    """A whole page: head (charset, CSP, title, CSS), the body ``parts``, then the script."""
    return "\n".join(
        [
            "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
            csp_meta(SCRIPT),
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>",
            *parts,
            f"<script>{SCRIPT}</script>",
            "</body></html>",
        ]
    )
