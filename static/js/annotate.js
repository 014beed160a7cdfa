// Keyboard-first rating on the task page. Lives in a file because the CSP forbids inline script.
// The server re-validates everything; this only makes the form fast to fill without a mouse.
(() => {
  "use strict";

  const form = () => document.querySelector("form[data-task-form]");
  const controls = () => Array.from(document.querySelectorAll("form[data-task-form] [data-aspect-control]"));
  // A score is a drop-down, a text box, or a row of radio buttons (role=radiogroup) whose focus sits on one radio.
  const controlOf = (el) => (el instanceof Element ? el.closest("form[data-task-form] [data-aspect-control]") : null);
  const isButtonRow = (control) => control.getAttribute("role") === "radiogroup";
  const radiosOf = (control) => Array.from(control.querySelectorAll("input[type='radio']"));

  function focusControl(el, options) {
    if (!el) return false;
    if (el instanceof Element && isButtonRow(el)) {
      const radios = radiosOf(el);
      const target = radios.find((radio) => radio.checked) || radios[0];
      if (!target) return false;
      target.focus(options);
      return true;
    }
    el.focus(options);
    return true;
  }

  function valueOf(control) {
    if (isButtonRow(control)) {
      const checked = radiosOf(control).find((radio) => radio.checked);
      return checked ? checked.value : "";
    }
    return control.value;
  }

  // The choices of a drop-down or a button row, as {value, key, pick()}.
  function choicesOf(control) {
    if (isButtonRow(control)) {
      return radiosOf(control).map((radio) => ({
        value: radio.value,
        key: radio.dataset.key,
        pick() {
          radio.checked = true;
          radio.focus();
          radio.dispatchEvent(new Event("change", { bubbles: true }));
        },
      }));
    }
    return Array.from(control.options || []).map((option) => ({
      value: option.value,
      key: option.dataset.key,
      pick() {
        control.value = option.value;
        control.dispatchEvent(new Event("change", { bubbles: true }));
      },
    }));
  }

  function controlAt(row, col) {
    return document.querySelector(`form[data-task-form] [data-aspect-control][data-row="${row}"][data-col="${col}"]`);
  }

  // After the last score, keyboard users continue with the preference (its "none is appropriate" box first),
  // then the reason.
  function afterLastControl() {
    const noneAppropriate = document.querySelector("form[data-task-form] input[name='none_appropriate']");
    const checked = document.querySelector("form[data-task-form] input[data-preference]:checked");
    const firstChoice = document.querySelector("form[data-task-form] input[data-preference]");
    return noneAppropriate || checked || firstChoice || document.getElementById("rationale");
  }

  function moveLinear(el, step) {
    const all = controls();
    const index = all.indexOf(el);
    const next = all[index + step];
    if (next) return focusControl(next);
    if (step > 0) return focusControl(afterLastControl());
    return false;
  }

  function moveAcross(el, step) {
    const row = Number(el.dataset.row) + step;
    return focusControl(controlAt(row, el.dataset.col));
  }

  function isEmpty(el) {
    const value = valueOf(el);
    return !value || !value.trim();
  }

  function firstMissing(theForm) {
    const emptyControl = controls().find(isEmpty);
    if (emptyControl) return emptyControl;
    const preference = theForm.querySelector("fieldset.preference[data-required]");
    if (preference && !preference.querySelector("input[data-preference]:checked")) {
      return preference.querySelector("input[data-preference]");
    }
    const rationale = theForm.querySelector("textarea[data-required]");
    if (rationale && isEmpty(rationale)) return rationale;
    return null;
  }

  function submitIfComplete(theForm) {
    const missing = firstMissing(theForm);
    if (!missing) {
      theForm.requestSubmit();
      return;
    }
    const hint = document.getElementById("incomplete-hint");
    if (hint) hint.textContent = hint.dataset.message || "";
    focusControl(missing);
  }

  function setByKey(control, key) {
    const choice = choicesOf(control).find((c) => c.key === key);
    if (!choice) return false;
    choice.pick();
    return true;
  }

  // Signed scales have no digit per value (a digit that sets -1 would mislead); "-" and "+" step from the
  // current value, or from 0 when nothing is set yet, so -1..1 takes one key per value. Returns whether the
  // step reached an end of the scale, where there is nothing more to step to and the focus can move on.
  function stepSigned(control, step) {
    const numeric = choicesOf(control).filter((c) => c.value !== "" && c.key !== "n");
    const current = valueOf(control);
    let index = numeric.findIndex((c) => c.value === current);
    if (index < 0) index = numeric.findIndex((c) => Number(c.value) === 0);
    const nextIndex = Math.min(Math.max(index + step, 0), numeric.length - 1);
    const next = numeric[nextIndex];
    if (!next) return false;
    next.pick();
    return nextIndex === 0 || nextIndex === numeric.length - 1;
  }

  function toggleHelp(el) {
    const help = document.getElementById(`help-${el.id}`);
    if (help && typeof help.togglePopover === "function") help.togglePopover();
  }

  const isTyping = (el) =>
    el instanceof HTMLTextAreaElement ||
    (el instanceof HTMLInputElement && !["radio", "checkbox", "submit", "button"].includes(el.type)) ||
    (el instanceof HTMLElement && el.isContentEditable);

  // "i" opens the instructions (collapsed after the first task) and puts the focus on them; again, it closes
  // them and returns the focus to where it was.
  let focusBeforeInstructions = null;
  function toggleInstructions() {
    const instructions = document.querySelector("details.instructions");
    if (!instructions) return false;
    const summary = instructions.querySelector("summary");
    if (!instructions.open) {
      focusBeforeInstructions = document.activeElement;
      instructions.open = true;
      if (summary) summary.focus({ preventScroll: true });
      instructions.scrollIntoView({ block: "start" });
      return true;
    }
    instructions.open = false;
    const back = focusBeforeInstructions;
    focusBeforeInstructions = null;
    if (back instanceof HTMLElement && back.isConnected) back.focus();
    return true;
  }

  document.addEventListener("keydown", (event) => {
    if (event.key !== "i" || event.altKey || event.ctrlKey || event.metaKey || event.isComposing) return;
    if (isTyping(event.target) || event.target instanceof HTMLSelectElement) {
      // A drop-down is no text box, but its own type-ahead would take the letter.
      if (!(event.target instanceof HTMLSelectElement && event.target.hasAttribute("data-aspect-control"))) return;
    }
    if (toggleInstructions()) event.preventDefault();
  });

  document.addEventListener("keydown", (event) => {
    const theForm = form();
    if (!theForm || event.altKey || event.isComposing) return;
    const target = event.target;
    if (!(target instanceof HTMLElement)) return;
    // Focus left on the page itself (after a click on plain text) still counts as the form's: the help promises
    // Enter and Ctrl+Enter anywhere. Other forms on the page (skip) and their fields keep their own keys.
    const onPage = target === document.body || target === document.documentElement;
    if (!onPage && !theForm.contains(target)) return;

    if (event.key === "Enter") {
      if (event.ctrlKey || event.metaKey) {
        event.preventDefault();
        theForm.requestSubmit();
        return;
      }
      // Newlines in text boxes, and buttons, links (the list of problems) and summaries, keep their own Enter.
      if (
        target instanceof HTMLTextAreaElement ||
        target instanceof HTMLButtonElement ||
        target instanceof HTMLAnchorElement ||
        target.tagName === "SUMMARY"
      ) {
        return;
      }
      event.preventDefault();
      submitIfComplete(theForm);
      return;
    }
    if (event.ctrlKey || event.metaKey) return;

    const control = controlOf(target);
    if (control) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        moveLinear(control, event.key === "ArrowDown" ? 1 : -1);
        return;
      }
      if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
        // The caret needs them in a number box; in a row of buttons they step along the row (the browser's own).
        if (target instanceof HTMLInputElement) return;
        event.preventDefault();
        moveAcross(control, event.key === "ArrowRight" ? 1 : -1);
        return;
      }
      if (event.key === "h" || event.key === "?") {
        event.preventDefault();
        toggleHelp(control);
        return;
      }
      const choosable = control instanceof HTMLSelectElement || isButtonRow(control);
      if (choosable && control.hasAttribute("data-signed") && /^[-+]$/.test(event.key)) {
        event.preventDefault();
        if (stepSigned(control, event.key === "+" ? 1 : -1)) moveLinear(control, 1);
        return;
      }
      if (choosable && /^[0-9n]$/.test(event.key)) {
        event.preventDefault();
        if (setByKey(control, event.key)) moveLinear(control, 1);
        return;
      }
      return;
    }

    const inPreference = target instanceof HTMLInputElement && !!target.closest("fieldset.preference");
    if (inPreference && /^[1-9]$/.test(event.key)) {
      const choice = theForm.querySelector(`input[data-preference][value="${event.key}"]`);
      if (choice) {
        event.preventDefault();
        choice.checked = true;
        choice.dispatchEvent(new Event("change", { bubbles: true }));
        focusControl(document.getElementById("rationale"));
      }
    }
  });

  function focusStart() {
    const summary = document.getElementById("error-summary");
    if (summary) {
      summary.focus();
      return;
    }
    const theForm = form();
    if (!theForm) return;
    // Every score filled (a revisit, a restored draft): what is left is the preference or the reason, else the
    // submit, so the keyboard never starts on the page itself.
    const start = firstMissing(theForm) || theForm.querySelector("button[type=submit].primary");
    if (!start || !focusControl(start, { preventScroll: true })) return;
    // On a first task the open instructions can push the first score below the fold: a keyboard user would type
    // into a control they cannot see. Bring the score with its label to the middle of the window; the instructions
    // stay open above it.
    const shown = start.closest(".rating") || start;
    const box = shown.getBoundingClientRect();
    if (box.top < 0 || box.bottom > window.innerHeight) shown.scrollIntoView({ block: "center" });
  }

  // Drafts: the form's values go to the server shortly after each change and when the page is left, so a reload,
  // "Continue" or another device finds them; the server fills the form from its draft. Once the form is submitted
  // or the task skipped, nothing more is sent: the lease is gone and a late draft would be refused anyway.
  const DRAFT_DELAY_MS = 800;
  let draftTimer = 0;
  let draftDirty = false;
  let draftSending = false;
  let leaving = false;

  function draftBody(theForm) {
    const body = new URLSearchParams(new FormData(theForm));
    body.delete("idempotency_key");
    return body;
  }

  function showDraftStatus(key) {
    const status = document.getElementById("draft-status");
    if (!status) return;
    const text = status.dataset[key] || "";
    if (status.textContent !== text) status.textContent = text;
  }

  async function saveDraft() {
    window.clearTimeout(draftTimer);
    const theForm = form();
    if (!theForm || leaving || !theForm.dataset.draftUrl || !draftDirty) return;
    if (draftSending) {
      // One request at a time, so an older draft never lands after a newer one.
      draftTimer = window.setTimeout(saveDraft, DRAFT_DELAY_MS);
      return;
    }
    draftSending = true;
    draftDirty = false;
    const body = draftBody(theForm);
    const sentFields = formFields(theForm);
    try {
      const response = await fetch(theForm.dataset.draftUrl, {
        method: "POST",
        body,
        credentials: "same-origin",
        headers: { "X-CSRFToken": body.get("csrfmiddlewaretoken") || "" },
      });
      showDraftStatus(response.ok ? "saved" : "failed");
      if (response.ok && !draftDirty) confirmLocally(theForm, sentFields);
    } catch {
      draftDirty = true;
      showDraftStatus("failed");
    } finally {
      draftSending = false;
    }
  }

  function scheduleDraft(event) {
    const theForm = form();
    if (!theForm || !(event.target instanceof Element) || !theForm.contains(event.target)) return;
    draftDirty = true;
    window.clearTimeout(draftTimer);
    draftTimer = window.setTimeout(saveDraft, DRAFT_DELAY_MS);
  }

  // The page may be closed before a request could finish: a beacon (or a keepalive request) outlives it.
  function sendDraftNow() {
    const theForm = form();
    if (!theForm || leaving || !theForm.dataset.draftUrl || !draftDirty) return;
    window.clearTimeout(draftTimer);
    draftDirty = false;
    const body = draftBody(theForm);
    if (navigator.sendBeacon && navigator.sendBeacon(theForm.dataset.draftUrl, body)) return;
    fetch(theForm.dataset.draftUrl, { method: "POST", body, credentials: "same-origin", keepalive: true }).catch(
      () => {},
    );
  }

  // This browser's copy: every change is also written to localStorage at once, and the copy is dropped only when
  // the server has stored the answer (or the task was skipped). The server draft above may fail while the server is
  // away, and so may the submit (a 503 or no network): the form then stays as it is and says so, and a reload or a
  // later visit to the task fills the form back from the copy. A copy the server confirmed as its draft is not
  // restored over the server's own, which may be newer (another device).
  const LOCAL_PREFIX = "evalsite:task-draft:";
  const LOCAL_MAX_AGE_MS = 14 * 24 * 3600 * 1000;
  const NOT_FORM_VALUES = new Set(["csrfmiddlewaretoken", "idempotency_key", "lease"]);
  const localKey = (theForm) => LOCAL_PREFIX + theForm.dataset.draftUrl;

  function readLocal(key) {
    try {
      const saved = JSON.parse(window.localStorage.getItem(key) || "null");
      return saved && Array.isArray(saved.fields) ? saved : null;
    } catch {
      return null;
    }
  }

  function writeLocal(key, saved) {
    try {
      window.localStorage.setItem(key, JSON.stringify(saved));
    } catch {
      // Storage full or turned off: the server draft is all there is.
    }
  }

  function forgetLocal(key) {
    try {
      window.localStorage.removeItem(key);
    } catch {
      // nothing to forget
    }
  }

  function formFields(theForm) {
    const fields = [];
    for (const [name, value] of new FormData(theForm)) {
      if (!NOT_FORM_VALUES.has(name) && typeof value === "string") fields.push([name, value]);
    }
    return fields;
  }

  // The form as the server sent it: a form nobody changed needs no copy.
  let servedFields = "";

  function keepLocally(theForm) {
    if (!theForm.dataset.draftUrl) return;
    const fields = formFields(theForm);
    const key = localKey(theForm);
    if (JSON.stringify(fields) === servedFields && !readLocal(key)) return;
    writeLocal(key, { at: Date.now(), confirmed: false, fields });
  }

  function confirmLocally(theForm, fields) {
    const key = localKey(theForm);
    const saved = readLocal(key);
    if (saved && JSON.stringify(saved.fields) === JSON.stringify(fields)) writeLocal(key, { ...saved, confirmed: true });
  }

  function restoreLocally(theForm) {
    if (!theForm.dataset.draftUrl) return false;
    const saved = readLocal(localKey(theForm));
    if (!saved || saved.confirmed) return false;
    const values = new Map();
    for (const [name, value] of saved.fields) values.set(name, value);
    for (const element of Array.from(theForm.elements)) {
      if (!element.name || NOT_FORM_VALUES.has(element.name)) continue;
      if (element.type === "hidden") {
        // A span aspect's marks live in a hidden field that spans.js keeps; the other hidden fields are the server's.
        if (!element.hasAttribute("data-span-value")) continue;
        element.value = values.get(element.name) || "";
        element.dispatchEvent(new Event("evalsite:restored"));
      } else if (element.type === "radio" || element.type === "checkbox") {
        element.checked = values.get(element.name) === element.value;
      } else if ("value" in element) {
        element.value = values.get(element.name) || "";
      }
    }
    return true;
  }

  function pruneLocal() {
    try {
      for (let index = window.localStorage.length - 1; index >= 0; index -= 1) {
        const key = window.localStorage.key(index);
        if (!key || !key.startsWith(LOCAL_PREFIX)) continue;
        const saved = readLocal(key);
        if (!saved || Date.now() - Number(saved.at || 0) > LOCAL_MAX_AGE_MS) forgetLocal(key);
      }
    } catch {
      // storage turned off
    }
  }

  function showSubmitStatus(text) {
    const status = document.getElementById("submit-status");
    if (status) status.textContent = text;
  }

  document.addEventListener("input", (event) => {
    const theForm = form();
    if (theForm && event.target instanceof Element && theForm.contains(event.target)) keepLocally(theForm);
  });
  document.addEventListener("change", (event) => {
    const theForm = form();
    if (theForm && event.target instanceof Element && theForm.contains(event.target)) keepLocally(theForm);
  });
  document.addEventListener("htmx:afterRequest", (event) => {
    const theForm = form();
    if (!theForm || event.detail.elt !== theForm) return;
    // By status, not htmx's "successful", which a redirect (HX-Redirect, the answer to a stored submit) never sets.
    const status = event.detail.xhr ? event.detail.xhr.status : 0;
    if (status >= 200 && status < 400) {
      forgetLocal(localKey(theForm));
    } else if (status === 0 || status >= 500) {
      // The answer was not stored: the server is busy or away, or the network is. Nothing leaves the page.
      leaving = false;
      keepLocally(theForm);
      const message = document.getElementById("submit-status");
      showSubmitStatus(message ? message.dataset.failed || "" : "");
    }
  });
  document.addEventListener("DOMContentLoaded", () => {
    pruneLocal();
    const theForm = form();
    if (theForm) servedFields = JSON.stringify(formFields(theForm));
    if (theForm && restoreLocally(theForm)) {
      draftDirty = true;
      draftTimer = window.setTimeout(saveDraft, DRAFT_DELAY_MS);
      showDraftStatus("restored");
    }
  });

  document.addEventListener("input", scheduleDraft);
  document.addEventListener("change", scheduleDraft);
  document.addEventListener("submit", (event) => {
    if (event.target instanceof Element && event.target.matches("form[data-task-form], form.skip-form")) {
      leaving = true;
      window.clearTimeout(draftTimer);
      const theForm = form();
      if (theForm) {
        showSubmitStatus("");
        if (event.target.matches("form.skip-form")) forgetLocal(localKey(theForm));
        else keepLocally(theForm);
      }
    }
  });
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "hidden") sendDraftNow();
  });
  window.addEventListener("pagehide", sendDraftNow);

  document.addEventListener("DOMContentLoaded", focusStart);
  // A refused submit comes back as a new form: put the focus on the list of problems, and keep what was sent.
  document.addEventListener("htmx:afterSettle", () => {
    if (!form()) return;
    leaving = false;
    draftDirty = true;
    draftTimer = window.setTimeout(saveDraft, DRAFT_DELAY_MS);
    focusStart();
  });
  // An error link moves focus to the field itself, not just the scroll position.
  document.addEventListener("click", (event) => {
    const link = event.target instanceof Element ? event.target.closest(".error-summary a[href^='#']") : null;
    if (!link) return;
    const field = document.getElementById(link.getAttribute("href").slice(1));
    if (field) {
      event.preventDefault();
      if (field.matches("[data-aspect-control]")) focusControl(field);
      else (field.matches("fieldset") ? field.querySelector("input") || field : field).focus();
    }
  });
})();
