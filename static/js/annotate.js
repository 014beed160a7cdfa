// Keyboard-first rating on the task page. Lives in a file because the CSP forbids inline script.
// The server re-validates everything; this only makes the form fast to fill without a mouse.
(() => {
  "use strict";

  const form = () => document.querySelector("form[data-task-form]");
  const controls = () => Array.from(document.querySelectorAll("form[data-task-form] [data-aspect-control]"));
  const isControl = (el) => el instanceof HTMLElement && el.hasAttribute("data-aspect-control");

  function focusControl(el) {
    if (!el) return false;
    el.focus();
    return true;
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
    return !el.value || !el.value.trim();
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
    missing.focus();
  }

  function setByKey(select, key) {
    const option = Array.from(select.options).find((o) => o.dataset.key === key);
    if (!option) return false;
    select.value = option.value;
    select.dispatchEvent(new Event("change", { bubbles: true }));
    return true;
  }

  // Signed scales have no digit per value (a digit that sets -1 would mislead); "-" and "+" step from the
  // current value, or from 0 when nothing is set yet, so -1..1 takes one key per value. Returns whether the
  // step reached an end of the scale, where there is nothing more to step to and the focus can move on.
  function stepSigned(select, step) {
    const numeric = Array.from(select.options).filter((o) => o.value !== "" && o.dataset.key !== "n");
    let index = numeric.findIndex((o) => o.value === select.value);
    if (index < 0) index = numeric.findIndex((o) => Number(o.value) === 0);
    const nextIndex = Math.min(Math.max(index + step, 0), numeric.length - 1);
    const next = numeric[nextIndex];
    if (!next) return false;
    select.value = next.value;
    select.dispatchEvent(new Event("change", { bubbles: true }));
    return nextIndex === 0 || nextIndex === numeric.length - 1;
  }

  function toggleHelp(el) {
    const help = document.getElementById(`help-${el.id}`);
    if (help && typeof help.togglePopover === "function") help.togglePopover();
  }

  document.addEventListener("keydown", (event) => {
    const theForm = form();
    if (!theForm || event.altKey || event.isComposing) return;
    const target = event.target;
    if (!(target instanceof HTMLElement) || !theForm.contains(target)) return;

    if (event.key === "Enter") {
      if (event.ctrlKey || event.metaKey) {
        event.preventDefault();
        theForm.requestSubmit();
        return;
      }
      // Newlines in text boxes and native button activation stay as they are.
      if (target instanceof HTMLTextAreaElement || target instanceof HTMLButtonElement) return;
      event.preventDefault();
      submitIfComplete(theForm);
      return;
    }
    if (event.ctrlKey || event.metaKey) return;

    if (isControl(target)) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        moveLinear(target, event.key === "ArrowDown" ? 1 : -1);
        return;
      }
      if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
        if (target instanceof HTMLInputElement) return; // the caret needs them in a number box
        event.preventDefault();
        moveAcross(target, event.key === "ArrowRight" ? 1 : -1);
        return;
      }
      if (event.key === "h" || event.key === "?") {
        event.preventDefault();
        toggleHelp(target);
        return;
      }
      if (target instanceof HTMLSelectElement && target.hasAttribute("data-signed") && /^[-+]$/.test(event.key)) {
        event.preventDefault();
        if (stepSigned(target, event.key === "+" ? 1 : -1)) moveLinear(target, 1);
        return;
      }
      if (target instanceof HTMLSelectElement && /^[0-9n]$/.test(event.key)) {
        event.preventDefault();
        if (setByKey(target, event.key)) moveLinear(target, 1);
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
    const first = controls().find(isEmpty);
    if (first) first.focus({ preventScroll: true });
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
    try {
      const response = await fetch(theForm.dataset.draftUrl, {
        method: "POST",
        body,
        credentials: "same-origin",
        headers: { "X-CSRFToken": body.get("csrfmiddlewaretoken") || "" },
      });
      showDraftStatus(response.ok ? "saved" : "failed");
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

  document.addEventListener("input", scheduleDraft);
  document.addEventListener("change", scheduleDraft);
  document.addEventListener("submit", (event) => {
    if (event.target instanceof Element && event.target.matches("form[data-task-form], form.skip-form")) {
      leaving = true;
      window.clearTimeout(draftTimer);
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
      const focusable = field.matches("fieldset") ? field.querySelector("input") || field : field;
      focusable.focus();
    }
  });
})();
