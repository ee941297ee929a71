"""The viewer's script and style sheet, written beside its pages (no external
asset, nothing inline: the pages' Content-Security-Policy allows only files
of their own origin)."""

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
       " base-uri 'none'; form-action 'none'")
"""The pages' policy (a ``<meta>`` in every page; the server sends it as a
header too, with ``frame-ancestors 'none'``, which a ``<meta>`` cannot carry)."""

def _favicon() -> bytes:
    """A 1x1 icon (a browser asks for one; a 404 is noise in its console)."""
    import struct

    image = struct.pack("<IiiHHIIiiII", 40, 1, 2, 1, 32, 0, 8, 0, 0, 0, 0)
    image += bytes((0xCA, 0x58, 0x0A, 0xFF)) + bytes(4)  # one blue pixel, its AND mask
    return struct.pack("<HHH", 0, 1, 1) + struct.pack("<BBBBHHII", 1, 1, 0, 0, 1, 32,
                                                       len(image), 22) + image


FAVICON = _favicon()

SCRIPT = """\
"use strict";
// Filters of the log: the choices live in the URL's fragment
// (index.html#model=m&parse=unparsed), so a link can open a filtered view.
(function () {
  var form = document.getElementById("filters");
  if (!form) { return; }
  var rows = Array.prototype.slice.call(document.querySelectorAll("#log tbody tr"));
  var shown = document.getElementById("shown");
  var names = ["model", "judge", "criterion", "parse", "score"];
  function read() {
    if (location.hash.indexOf("=") < 0) { return; }
    var params = new URLSearchParams(location.hash.slice(1));
    names.forEach(function (n) { form.elements[n].value = params.get(n) || ""; });
  }
  function keep(row, want) {
    return names.every(function (n) {
      var w = want[n], v = row.getAttribute("data-" + n) || "";
      if (!w) { return true; }
      if (n === "parse" && w === "not-ok") { return v !== "" && v !== "ok"; }
      return v === w;
    });
  }
  function apply() {
    var want = {}, n = 0;
    names.forEach(function (name) { want[name] = form.elements[name].value; });
    rows.forEach(function (row) { var ok = keep(row, want); row.hidden = !ok; n += ok ? 1 : 0; });
    shown.textContent = n + " of " + rows.length + " rows shown";
  }
  function write() {
    var params = new URLSearchParams();
    names.forEach(function (n) {
      if (form.elements[n].value) { params.set(n, form.elements[n].value); }
    });
    history.replaceState(null, "", "#" + params.toString());
    apply();
  }
  form.addEventListener("change", write);
  window.addEventListener("hashchange", function () { read(); apply(); });
  read();
  apply();
})();
"""

STYLE = """\
body { font: 15px/1.45 system-ui, sans-serif; margin: 1.5rem; color: #1b1b1b; }
h1 { font-size: 1.35rem; } h2 { font-size: 1.1rem; margin-top: 1.6rem; }
p.note { color: #555; max-width: 60rem; }
form#filters { display: flex; flex-wrap: wrap; gap: .8rem; align-items: end; margin: 1rem 0; }
form#filters label { display: flex; flex-direction: column; font-size: .85rem; }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid #ddd; padding: .3rem .5rem; text-align: left;
         vertical-align: top; }
th { background: #f3f3f3; position: sticky; top: 0; }
tr.unparsed td, tr.error td { background: #fff3e0; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f7f7f7; padding: .6rem;
      border: 1px solid #e2e2e2; max-height: 28rem; overflow: auto; }
.judgment { border: 1px solid #ccc; padding: .5rem 1rem; margin: 1rem 0; }
.judgment:target { border: 2px solid #0a58ca; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dt { font-weight: 600; }
.status-unparsed, .status-error { color: #9a3b00; font-weight: 600; }
"""
