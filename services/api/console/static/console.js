// Overseer review console: keyboard shortcuts and queue-row navigation.
// No inline scripts (the Content-Security-Policy forbids them); htmx does the rest.
(function () {
  "use strict";

  function typing(el) {
    if (!el) return false;
    var tag = el.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable;
  }

  function rows() { return Array.prototype.slice.call(document.querySelectorAll("tr.row[data-href]")); }

  function select(index) {
    var all = rows();
    if (!all.length) return;
    index = Math.max(0, Math.min(index, all.length - 1));
    all.forEach(function (r, i) { r.classList.toggle("selected", i === index); r.setAttribute("aria-selected", i === index ? "true" : "false"); });
    all[index].scrollIntoView({ block: "nearest" });
  }

  function selectedIndex() {
    return rows().findIndex(function (r) { return r.classList.contains("selected"); });
  }

  function go(selector) {
    var link = document.querySelector(selector);
    if (link && link.href) { window.location.assign(link.href); return true; }
    return false;
  }

  function toggleHelp(force) {
    var help = document.getElementById("help");
    if (!help) return;
    help.hidden = force === undefined ? !help.hidden : !force;
  }

  function focusEdit() {
    var target = document.querySelector("#fields input[data-attention]") ||
                 document.querySelector("#fields input[name^='field.']") ||
                 document.querySelector("#budget-usd");
    if (target) { target.focus(); target.select(); }
  }

  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === "Escape") {
      toggleHelp(false);
      if (typing(document.activeElement)) document.activeElement.blur();
      return;
    }
    if (typing(ev.target)) return;
    var page = document.body.getAttribute("data-page");
    var handled = true;
    switch (ev.key) {
      case "?": toggleHelp(); break;
      case "j":
        if (page === "queue") select(selectedIndex() + 1); else handled = go("#next");
        break;
      case "k":
        if (page === "queue") select(Math.max(selectedIndex() - 1, 0)); else handled = go("#prev");
        break;
      case "Enter":
      case "o":
        if (page === "queue") {
          var i = selectedIndex();
          if (i >= 0) window.location.assign(rows()[i].getAttribute("data-href")); else handled = false;
        } else handled = false;
        break;
      case "u": handled = go("#back"); break;
      case "a": {
        var form = document.getElementById("approve-form");
        var button = document.getElementById("approve");
        if (form && button) form.requestSubmit(button); else handled = false;
        break;
      }
      case "r": {
        var note = document.getElementById("reject-note");
        if (note) note.focus(); else handled = false;
        break;
      }
      case "e": focusEdit(); break;
      case "c": {
        var claim = document.getElementById("claim-toggle");
        if (claim) claim.click(); else handled = false;
        break;
      }
      default: handled = false;
    }
    if (handled) ev.preventDefault();
  });

  document.addEventListener("click", function (ev) {
    if (ev.target.closest("[data-help-toggle]")) { toggleHelp(); return; }
    if (ev.target.closest("[data-edit]")) { focusEdit(); return; }
    var row = ev.target.closest("tr.row[data-href]");
    if (row && !ev.target.closest("a, button, input, select")) window.location.assign(row.getAttribute("data-href"));
  });

  // Keep a selection after htmx swaps the queue table (filters changed).
  document.addEventListener("htmx:afterSwap", function () { if (rows().length && selectedIndex() < 0) select(0); });
  document.addEventListener("DOMContentLoaded", function () {
    if (document.body.getAttribute("data-page") === "queue") select(0);
  });
})();
