// Keyboard-first fact review. In a file because the CSP forbids inline script; the server
// re-validates everything, this only makes labelling fast without a mouse.
(() => {
  "use strict";

  // htmx "settles" the style attribute of swapped elements by re-setting it, which the CSP
  // (no unsafe-inline) refuses when the browser has left an empty style="" on a form control.
  if (window.htmx) {
    window.htmx.config.attributesToSettle = ["class", "width", "height"];
  }

  const facts = () => Array.from(document.querySelectorAll("#facts li.fact[data-fact]"));
  const reviewForm = () => document.querySelector("form[data-review-form]");
  let current = 0;

  function isTyping(target) {
    return target instanceof HTMLElement && (target.matches("textarea, input:not([type=radio]), select") || target.isContentEditable);
  }

  function focusFact(index) {
    const all = facts();
    if (!all.length) return;
    current = Math.max(0, Math.min(index, all.length - 1));
    all.forEach((li, i) => li.classList.toggle("focused", i === current));
    all[current].focus();
    all[current].scrollIntoView({ block: "nearest" });
  }

  function unlabelled() {
    return facts().findIndex((li) => !li.querySelector("input[type=radio]:checked"));
  }

  function label(key) {
    const li = facts()[current];
    if (!li) return;
    const radio = li.querySelector(`input[type=radio][data-key="${key}"]`);
    if (!radio) return;
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
    if (current < facts().length - 1) focusFact(current + 1);
  }

  function submit(force) {
    const missing = unlabelled();
    if (missing >= 0 && !force) {
      focusFact(missing);
      return;
    }
    const form = reviewForm();
    if (form) form.requestSubmit();
  }

  // htmx replaces the fact list after an edit; labels chosen but not yet submitted survive it.
  let remembered = {};
  document.addEventListener("htmx:beforeSwap", () => {
    remembered = {};
    document.querySelectorAll("#facts input[type=radio]:checked").forEach((r) => { remembered[r.name] = r.value; });
  });
  document.addEventListener("htmx:afterSwap", () => {
    Object.entries(remembered).forEach(([name, value]) => {
      const radio = document.querySelector(`#facts input[type=radio][name="${CSS.escape(name)}"][value="${CSS.escape(value)}"]`);
      if (radio) radio.checked = true;
    });
    focusFact(Math.min(current, facts().length - 1));
  });

  document.addEventListener("focusin", (event) => {
    const li = event.target instanceof HTMLElement ? event.target.closest("#facts li.fact") : null;
    if (li) {
      const index = facts().indexOf(li);
      if (index >= 0) {
        current = index;
        facts().forEach((other, i) => other.classList.toggle("focused", i === current));
      }
    }
  });

  document.addEventListener("keydown", (event) => {
    if (!document.querySelector("#facts")) return;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      submit(true);
      return;
    }
    if (isTyping(event.target) || event.altKey || event.ctrlKey || event.metaKey) return;
    switch (event.key) {
      case "s":
      case "n":
      case "i":
        event.preventDefault();
        label(event.key);
        break;
      case "ArrowDown":
      case "j":
        event.preventDefault();
        focusFact(current + 1);
        break;
      case "ArrowUp":
      case "k":
        event.preventDefault();
        focusFact(current - 1);
        break;
      case "e": {
        const details = facts()[current] && facts()[current].querySelector("details[data-edit]");
        if (details) {
          event.preventDefault();
          details.open = true;
          const box = details.querySelector("textarea");
          if (box) box.focus();
        }
        break;
      }
      case "Enter":
        if (event.target instanceof HTMLButtonElement) return;
        event.preventDefault();
        submit(false);
        break;
      default:
        break;
    }
  });

  document.addEventListener("DOMContentLoaded", () => {
    const missing = unlabelled();
    focusFact(missing >= 0 ? missing : 0);
  });
})();
