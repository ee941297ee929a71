// Task pages: keyboard-only rating, server-side drafts, time spent,
// rationale prompts and double-submit protection. No inline scripts (CSP).
"use strict";

(function () {
  const form = document.getElementById("task-form");
  if (!form) return;
  const csrf = form.querySelector("input[name=csrf]").value;
  const draftUrl = form.dataset.draftUrl;
  const submitted = form.dataset.submitted === "1";
  const groups = Array.from(document.querySelectorAll("fieldset[data-keys]"));
  const CHOICE_KEYS = { a: "A", b: "B", t: "tie", u: "both_bad" };

  // Time spent: only while the page is visible.
  let activeMs = 0;
  let since = document.visibilityState === "visible" ? performance.now() : null;
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") {
      since = performance.now();
    } else {
      if (since !== null) activeMs += performance.now() - since;
      since = null;
      flushDraft(true);
    }
  });
  function secondsSpent() {
    const now = since === null ? 0 : performance.now() - since;
    return ((activeMs + now) / 1000).toFixed(1);
  }

  // A safety-critical criterion scored -1 or -2 needs a rationale.
  function updateRationale(group) {
    if (group.dataset.safety !== "1") return;
    const checked = group.querySelector("input[type=radio]:checked");
    const needs = checked !== null && Number(checked.value) <= -1;
    const box = group.querySelector("textarea");
    box.required = needs;
    group.querySelector(".comment-label").textContent =
      needs ? "Rationale (required for a score of -1 or -2)" : "Comment (optional)";
  }
  groups.forEach(updateRationale);

  // On to the next group; after the last one, back to the first still unanswered
  // (a vote skipped with Tab), else the submit button.
  function focusNext(group) {
    const i = groups.indexOf(group);
    const open = groups.find(function (g) { return !g.querySelector("input[type=radio]:checked"); });
    if (i >= 0 && i + 1 < groups.length) groups[i + 1].focus();
    else (open || document.getElementById("submit")).focus();
  }

  function pick(group, input) {
    if (!input || input.disabled) return;
    input.checked = true;
    input.dispatchEvent(new Event("change", { bubbles: true }));
    updateRationale(group);
    const box = group.querySelector("textarea");
    if (box && box.required && !box.value) box.focus();
    else focusNext(group);
  }

  document.addEventListener("keydown", function (ev) {
    const target = ev.target;
    const typing = target.tagName === "TEXTAREA" || (target.tagName === "INPUT" && target.type !== "radio");
    if (typing || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const group = target.closest ? target.closest("fieldset[data-keys]") : null;
    if (ev.key === "Enter") {
      ev.preventDefault();
      form.requestSubmit();
      return;
    }
    if (!group) return;
    if (group.dataset.keys === "score" && ev.key >= "1" && ev.key <= "5") {
      ev.preventDefault();
      pick(group, group.querySelectorAll("input[type=radio]")[Number(ev.key) - 1]);
    } else if (group.dataset.keys === "choice" && CHOICE_KEYS[ev.key.toLowerCase()]) {
      ev.preventDefault();
      pick(group, group.querySelector("input[value=" + CHOICE_KEYS[ev.key.toLowerCase()] + "]"));
    }
  });

  // Drafts: debounced saves of every score and comment, kept server-side.
  const status = document.getElementById("draft-status");
  let timer = null;
  let dirty = false;
  function draftBody() {
    const fields = {};
    let choice = null;
    new FormData(form).forEach(function (value, name) {
      if (name === "choice") choice = value;
      else if (/^[sc][12]\./.test(name) && value !== "") fields[name] = value;
    });
    return JSON.stringify({ fields: fields, choice: choice });
  }
  function flushDraft(leaving) {
    if (!dirty || submitted) return;
    dirty = false;
    clearTimeout(timer);
    fetch(draftUrl, {
      method: "POST", keepalive: Boolean(leaving), credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: draftBody(),
    }).then(function (r) {
      status.textContent = r.ok ? "Draft saved." : "Draft not saved (the task may have expired).";
    }).catch(function () {
      dirty = true;
      status.textContent = "Offline: the draft will be saved when the connection returns.";
    });
  }
  function changed(ev) {
    const group = ev.target.closest("fieldset[data-keys]");
    if (group) updateRationale(group);
    if (submitted) return;
    dirty = true;
    clearTimeout(timer);
    timer = setTimeout(flushDraft, 600);
  }
  form.addEventListener("change", changed);
  form.addEventListener("input", changed);
  window.addEventListener("pagehide", function () { flushDraft(true); });
  window.addEventListener("online", function () { flushDraft(false); });

  // One submission per page: a double click sends the same idempotency key once.
  let sending = false;
  form.addEventListener("submit", function (ev) {
    if (sending) { ev.preventDefault(); return; }
    sending = true;
    dirty = false;
    clearTimeout(timer);
    form.querySelector("input[name=time_spent_s]").value = secondsSpent();
    document.getElementById("submit").disabled = true;
  });

  const error = document.getElementById("form-error");
  const bad = error && error.dataset.field ? form.querySelector("[name='" + error.dataset.field + "']") : null;
  // Carry on where the clinician stopped: the first group without a value.
  const open = groups.find(function (g) { return !g.querySelector("input[type=radio]:checked"); });
  const first = bad ? bad.closest("fieldset") || bad : open || groups[0];
  if (first) first.focus();
})();
