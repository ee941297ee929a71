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
  function randomId() {  // 22 URL-safe characters (128 random bits)
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return btoa(String.fromCharCode.apply(null, bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

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
      // On a button or link Enter does what that does ("Submit and stop", "Outside my
      // expertise", a menu link); elsewhere in the task form, or nowhere, it submits.
      if (target.closest && target.closest("a, button, select, summary")) return;
      if (target !== document.body && target.id !== "form-error" && !form.contains(target)) return;
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

  // Drafts: every change is kept in this browser at once (localStorage) and
  // saved on the server after a pause, as a new version of the draft the page
  // started from (the server refuses a page that missed a later save, from
  // another tab say, unless it sends the same). The browser's copy outlives a
  // reload that beats the last save, a lost connection and a failed
  // submission: on load it fills the form when the server's draft is still
  // the one it started from. Edits of a submitted task are kept the same way
  // until they are sent.
  const status = document.getElementById("draft-status");
  const localKey = "clinieval-draft:" + draftUrl;
  let timer = null;
  let dirty = false;
  let base = Number(form.dataset.draftSaves || 0);
  const pageId = randomId();
  let seq = 0;  // changes on this page so far: the server keeps the latest of its saves
  let continues = null;  // the page whose answers this one took over from the browser,
  let continuesSeq = null;  // up to that page's change of this number,
  let earlier = [];  // and the pages that one carried on from: [page, change] pairs, newest first
  let stored = true;  // whether this browser keeps a copy (storage may be off or full)
  function formState() {
    const fields = {};
    let choice = null;
    new FormData(form).forEach(function (value, name) {
      if (name === "choice") choice = value;
      else if (/^[sc][12]\./.test(name) && value !== "") fields[name] = value;
    });
    return { fields: fields, choice: choice };
  }
  function same(x, y) {
    const keys = Object.keys(x.fields).sort();
    return x.choice === y.choice && keys.join() === Object.keys(y.fields).sort().join() &&
      keys.every(function (k) { return x.fields[k] === y.fields[k]; });
  }
  function keepLocal() {
    try {
      localStorage.setItem(localKey, JSON.stringify({
        base: base, edit: submitted, page: pageId, seq: seq, continues: continues,
        continues_seq: continuesSeq, earlier: earlier, kept: Date.now(), state: formState() }));
      stored = true;
    } catch (e) {  // full or off: an older copy must not come back over newer answers
      stored = false;
      forgetLocal();
    }
  }
  function forgetLocal() {
    try { localStorage.removeItem(localKey); } catch (e) { /* nothing kept */ }
  }
  function keptLocal() {
    try {
      const kept = JSON.parse(localStorage.getItem(localKey) || "null");
      return kept && typeof kept.base === "number" && kept.state && kept.state.fields ? kept : null;
    } catch (e) { return null; }
  }
  const CHAIN = 4;  // pages remembered before the one carried on from (as the server)
  function predecessors(copy) {  // [page, change] pairs the copy's page carried on from
    const pairs = [[copy.continues, copy.continues_seq]].concat(
      Array.isArray(copy.earlier) ? copy.earlier : []);
    return pairs.filter(function (p) {
      return Array.isArray(p) && typeof p[0] === "string" && typeof p[1] === "number";
    }).slice(0, CHAIN + 1);
  }
  function where() {
    return stored ? "Your answers stay on this page and in this browser." : "Your answers stay on this page.";
  }
  function withBody(r) {  // the response with its JSON body ({} when it has none)
    return r.json().then(function (data) { return [r, data]; }, function () { return [r, {}]; });
  }
  function flushDraft(leaving) {
    if (!dirty || submitted) return;
    dirty = false;
    clearTimeout(timer);
    const body = formState();
    body.base = base;
    body.page = pageId;
    body.seq = seq;
    body.continues = continues;
    body.continues_seq = continuesSeq;
    body.earlier = earlier;
    fetch(draftUrl, {
      method: "POST", keepalive: Boolean(leaving), credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf, "Accept": "application/json" },
      body: JSON.stringify(body),
    }).then(withBody).then(function (answer) {
      const r = answer[0], data = answer[1];
      if (r.ok) {
        base = data.version;
        keepLocal();
        status.textContent = "Draft saved.";
        return;
      }
      status.textContent = "Draft not saved: " + reason(r, data) + " " + where();
    }).catch(function () {
      dirty = true;
      status.textContent = "Offline: the draft will be saved when the connection returns. " + where();
    });
  }
  function reason(r, data) {
    if (r.status === 401) return "you are signed out. Sign in again (in another tab), then reload this page.";
    if (r.status === 403 && /CSRF/.test((data.error && data.error.message) || "")) {
      return "this page belongs to a session that ended. Sign in again if needed, then reload this page.";
    }
    const text = (data.error && (data.error.reason || data.error.message)) || "the server answered " + r.status;
    return text.replace(/[.\s]+$/, "") + ".";
  }

  // A change after a submission that did not get through is a new submission:
  // a fresh key, so a first one that did arrive (its answer lost on the way)
  // is not taken for it (the change is stored as a revision).
  let attempted = false;
  function freshKey() {
    form.querySelector("input[name=idempotency_key]").value = randomId();
  }
  function changed(ev) {
    const group = ev.target.closest("fieldset[data-keys]");
    if (group) updateRationale(group);
    if (group) group.querySelectorAll("[aria-invalid]").forEach(function (el) {
      el.removeAttribute("aria-invalid");
    });
    if (attempted) { freshKey(); attempted = false; }
    seq += 1;
    keepLocal();
    if (submitted) return;  // an edit is sent as a new revision, not as a draft
    dirty = true;
    clearTimeout(timer);
    timer = setTimeout(flushDraft, 600);
  }
  function restore(state) {
    form.querySelectorAll("textarea[name]").forEach(function (box) {
      if (/^c[12]\./.test(box.name)) box.value = state.fields[box.name] || "";
    });
    Object.keys(state.fields).forEach(function (name) {
      if (!/^s[12]\./.test(name)) return;
      const input = form.querySelector("input[type=radio][name='" + CSS.escape(name) + "'][value='" +
        CSS.escape(String(state.fields[name])) + "']");
      if (input) input.checked = true;
    });
    if (state.choice) {
      const input = form.querySelector("input[name=choice][value='" + CSS.escape(String(state.choice)) + "']");
      if (input) input.checked = true;
    }
    groups.forEach(updateRationale);
  }
  // The browser's copy is restored when the server's draft is the one it started
  // from, or was saved by the page that kept it, or by a page that one carried on
  // from (through reloads), up to the change it took over: a save on leaving that
  // arrived late. The server accepts the same (submit._draft_order).
  const kept = keptLocal();
  const savedBy = form.dataset.draftPage || null;
  const savedSeq = form.dataset.draftSeq === "" ? null : Number(form.dataset.draftSeq);
  const before = kept ? predecessors(kept) : [];
  const current = kept && (kept.base === base || (savedBy !== null && (savedBy === kept.page ||
    (savedSeq !== null && before.some(function (p) { return p[0] === savedBy && savedSeq <= p[1]; })))));
  if (kept && !kept.edit && current) {  // this page carries on from the copy's page (and its own)
    earlier = before.slice(0, CHAIN);
    continues = typeof kept.page === "string" ? kept.page : null;
    continuesSeq = typeof kept.seq === "number" ? kept.seq : null;
  }
  // On a submitted task any copy is the clinician's unsent change: edits, or answers
  // changed after a submission whose answer did not arrive.
  if (kept && (submitted || (!kept.edit && current)) && !same(kept.state, formState())) {
    restore(kept.state);
    if (submitted) {
      status.textContent = "Your unsent changes, kept in this browser, are back: " +
        "Save a new revision to keep them.";
    } else {
      dirty = true;
      flushDraft(false);
      status.textContent = "Your latest answers, kept in this browser, are back; saving them.";
    }
  } else if (kept) {
    forgetLocal();  // what the server holds is newer, or the same
  }
  form.addEventListener("change", changed);
  form.addEventListener("input", changed);
  window.addEventListener("pagehide", function () { flushDraft(true); });
  window.addEventListener("online", function () { flushDraft(false); });
  const skip = document.querySelector("form.skip");
  if (skip) skip.addEventListener("submit", forgetLocal);

  // The submission goes by script: a lost connection or a refusal leaves the
  // page and its answers as they are, with the reason beside the field it
  // names, and sending again reuses the idempotency key (a submission that did
  // arrive is not stored twice). One submission at a time: a double click
  // sends it once.
  let sending = false;
  function refused(message, field) {
    form.querySelectorAll("[aria-invalid]").forEach(function (el) {
      el.removeAttribute("aria-invalid");
      el.removeAttribute("aria-describedby");
    });
    let box = document.getElementById("form-error");
    if (!box) {
      box = document.createElement("p");
      box.id = "form-error";
      box.className = "error";
      box.setAttribute("role", "alert");
      box.tabIndex = -1;
    }
    box.textContent = message;
    const named = field ? form.querySelector("[name='" + CSS.escape(field) + "']") : null;
    const bad = named && named.type !== "hidden" ? named : null;
    const fieldset = bad ? bad.closest("fieldset") : null;
    // Beside the field it names (inside its criterion), else in the status line
    // that stays on screen (above the form, the clinician would not see it).
    if (fieldset) fieldset.appendChild(box);
    else document.getElementById("statusbar").prepend(box);
    if (bad) {
      bad.setAttribute("aria-invalid", "true");
      bad.setAttribute("aria-describedby", "form-error");
      if (bad.type === "radio") (fieldset || bad).focus();
      else bad.focus();
    } else {
      box.focus();
    }
    box.scrollIntoView({ block: "center" });
  }
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    if (sending) return;
    sending = true;
    form.querySelector("input[name=time_spent_s]").value = secondsSpent();
    const button = document.getElementById("submit");
    button.disabled = true;
    clearTimeout(timer);  // no draft save racing the submission; again() re-arms it
    const body = new URLSearchParams(new FormData(form));
    if (ev.submitter && ev.submitter.name) body.set(ev.submitter.name, ev.submitter.value);
    function again(message, field) {
      sending = false;
      attempted = true;
      button.disabled = false;
      if (dirty) timer = setTimeout(flushDraft, 600);
      refused(message, field);
    }
    fetch(form.action, {
      method: "POST", credentials: "same-origin", body: body,
      headers: { "Accept": "application/json", "X-CSRF-Token": csrf },
    }).then(withBody).then(function (answer) {
      const r = answer[0], data = answer[1];
      if (r.ok && data.page) {
        dirty = false;
        clearTimeout(timer);
        forgetLocal();
        window.location.assign(data.page);
        return;
      }
      if (r.redirected && !data.page) {  // to the profile, say: the answers stay in this browser
        window.location.assign(r.url);
        return;
      }
      const field = data.error && data.error.field;
      let text = "Not sent: " + reason(r, data);
      if (field === "lease") text += " Tasks, in the menu above, has another one.";
      else text += " " + where();
      again(text, field);
    }).catch(function () {
      again("Not sent: no connection to the server. " + where() +
        " Press Submit again when the connection is back.");
    });
  });

  foldAnchors(form);

  const error = document.getElementById("form-error");
  const bad = error && error.dataset.field ? form.querySelector("[name='" + error.dataset.field + "']") : null;
  // Carry on where the clinician stopped: the first group without a value.
  const open = groups.find(function (g) { return !g.querySelector("input[type=radio]:checked"); });
  const first = bad ? bad.closest("fieldset") || bad : open || groups[0];
  if (first) first.focus();
})();

// The anchors' texts fold away once the clinician knows them (the scores
// stay, each text in its tooltip); the choice holds for every task page of
// this browser.
function foldAnchors(form) {
  const button = document.getElementById("fold-anchors");
  if (!button) return;
  const KEY = "clinieval-anchors-folded";
  function apply(on) {
    form.classList.toggle("anchors-folded", on);
    button.setAttribute("aria-pressed", on ? "true" : "false");
    button.textContent = on ? "Show the anchors' texts" : "Hide the anchors' texts (I know them)";
  }
  let stored = null;
  try { stored = localStorage.getItem(KEY); } catch (e) { /* storage off: shown */ }
  apply(stored === "1");
  button.hidden = false;
  button.addEventListener("click", function () {
    const on = !form.classList.contains("anchors-folded");
    try { localStorage.setItem(KEY, on ? "1" : "0"); } catch (e) { /* this page only */ }
    apply(on);
  });
}

// Answers kept in this browser go at sign-out (a shared workstation keeps no
// one's unsent answers), and any older than 30 days on every page.
(function () {
  const PREFIX = "clinieval-draft:";
  function each(drop) {
    try {
      for (let i = localStorage.length - 1; i >= 0; i--) {
        const key = localStorage.key(i);
        if (key && key.indexOf(PREFIX) === 0 && drop(key)) localStorage.removeItem(key);
      }
    } catch (e) { /* storage off: nothing kept */ }
  }
  const month = Date.now() - 30 * 24 * 3600 * 1000;
  each(function (key) {
    try { return !(JSON.parse(localStorage.getItem(key)).kept > month); } catch (e) { return true; }
  });
  const signout = document.querySelector("form.signout");
  if (signout) signout.addEventListener("submit", function () { each(function () { return true; }); });
})();
