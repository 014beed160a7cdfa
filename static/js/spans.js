// Marking error spans on the task page. Lives in a file because the CSP forbids inline script.
// Offsets are kept as JavaScript string indices (UTF-16 code units) and sent as such, saying so ("offsets": "utf16");
// the server converts them to the code points it stores and checks every span against the exact stored text.
// Movement and selection snap to grapheme boundaries, so an emoji or a letter with its combining mark is never split.
(() => {
  "use strict";

  const segmenter = typeof Intl !== "undefined" && Intl.Segmenter ? new Intl.Segmenter(undefined, { granularity: "grapheme" }) : null;

  function graphemeBoundaries(text) {
    const bounds = [0];
    if (segmenter) {
      for (const part of segmenter.segment(text)) if (part.index > 0) bounds.push(part.index);
    } else {
      let index = 0;
      for (const character of text) {
        index += character.length;
        bounds.push(index);
      }
      bounds.pop();
    }
    if (text.length > 0) bounds.push(text.length);
    return bounds;
  }

  // Stored answers count code points; the page counts UTF-16 units.
  function codePointsToUnits(text, offset) {
    let units = 0;
    let points = 0;
    for (const character of text) {
      if (points === offset) return units;
      units += character.length;
      points += 1;
    }
    return units;
  }

  function parseValue(text, value) {
    if (!value) return { spans: [], noError: false };
    try {
      const data = JSON.parse(value);
      const inUnits = data.offsets === "utf16";
      const spans = (data.spans || []).map((span) => ({
        start: span.start == null ? null : inUnits ? span.start : codePointsToUnits(text, span.start),
        end: span.end == null ? null : inUnits ? span.end : codePointsToUnits(text, span.end),
        category: span.category,
        severity: span.severity,
        note: span.note || "",
      }));
      return { spans, noError: !!data.no_error };
    } catch (error) {
      return { spans: [], noError: false };
    }
  }

  function offsetWithin(root, node, offset) {
    if (node === root) {
      let total = 0;
      for (let index = 0; index < offset && index < root.childNodes.length; index += 1) {
        total += root.childNodes[index].textContent.length;
      }
      return total;
    }
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    let total = 0;
    for (let current = walker.nextNode(); current; current = walker.nextNode()) {
      if (current === node) return total + offset;
      total += current.textContent.length;
    }
    if (node.nodeType !== Node.TEXT_NODE && root.contains(node)) {
      const range = document.createRange();
      range.setStart(root, 0);
      range.setEnd(node, offset);
      return range.toString().length;
    }
    return null;
  }

  class SpanCell {
    constructor(root) {
      this.root = root;
      this.input = root.querySelector("[data-span-value]");
      this.textEl = root.querySelector(".span-text");
      this.text = this.textEl.dataset.text || "";
      this.bounds = graphemeBoundaries(this.text);
      this.editor = root.querySelector("[data-span-editor]");
      this.quote = root.querySelector("[data-span-quote]");
      this.category = root.querySelector("[data-span-category]");
      this.severities = Array.from(root.querySelectorAll("[data-span-severity]"));
      this.note = root.querySelector("[data-span-note]");
      this.markButton = root.querySelector("[data-span-mark]");
      this.noneBox = root.querySelector("[data-span-none]");
      this.list = root.querySelector("[data-span-list]");
      this.itemTemplate = root.querySelector("template[data-span-item]");
      const parsed = parseValue(this.text, this.input.value);
      this.spans = parsed.spans;
      this.noneBox.checked = parsed.noError;
      this.caret = 0;
      this.anchor = null;
      this.anchorFromShift = false;
      this.selection = null;
      this.editing = -1;
      this.bind();
      this.render();
    }

    snapDown(offset) {
      let found = 0;
      for (const bound of this.bounds) if (bound <= offset) found = bound;
      return found;
    }

    snapUp(offset) {
      for (const bound of this.bounds) if (bound >= offset) return bound;
      return this.text.length;
    }

    step(offset, direction) {
      const index = this.bounds.indexOf(this.snapDown(offset));
      const next = Math.min(this.bounds.length - 1, Math.max(0, index + direction));
      return this.bounds[next] ?? 0;
    }

    setSelection(a, b) {
      const start = this.snapDown(Math.min(a, b));
      const end = this.snapUp(Math.max(a, b));
      this.selection = end > start ? { start, end } : null;
      this.markButton.disabled = !this.selection;
      if (this.editing >= 0 && this.selection) this.showQuote();
    }

    bind() {
      this.textEl.addEventListener("keydown", (event) => this.onKey(event));
      // Only the text is redrawn for the caret: redrawing the list would drop the focus of the button being tabbed to.
      // A pointer that focuses the text is starting a selection: redrawing now would drop the text it started in.
      this.textEl.addEventListener("pointerdown", () => {
        this.pointing = true;
      });
      this.textEl.addEventListener("focus", () => {
        if (!this.pointing) this.renderText();
      });
      this.textEl.addEventListener("blur", () => this.renderText());
      const fromPointer = () =>
        window.setTimeout(() => {
          this.readNativeSelection(true);
          this.pointing = false;
        }, 0);
      document.addEventListener("mouseup", () => this.pointing && fromPointer());
      document.addEventListener("touchend", () => this.pointing && fromPointer());
      document.addEventListener("selectionchange", () => {
        const native = window.getSelection();
        if (native && native.rangeCount && this.textEl.contains(native.anchorNode)) this.readNativeSelection(false);
      });
      this.markButton.addEventListener("click", () => this.openEditor(-1));
      this.root.querySelector("[data-span-save]").addEventListener("click", () => this.save());
      this.root.querySelector("[data-span-cancel]").addEventListener("click", () => this.closeEditor());
      this.editor.addEventListener("keydown", (event) => {
        const onSeverity = event.target instanceof HTMLInputElement && event.target.hasAttribute("data-span-severity");
        if (onSeverity && /^Arrow(Left|Right|Up|Down)$/.test(event.key)) {
          // The radios belong to no form, so the browser's own arrow keys are not relied on to move between them.
          event.preventDefault();
          event.stopPropagation();
          const step = event.key === "ArrowRight" || event.key === "ArrowDown" ? 1 : -1;
          const index = this.severities.indexOf(event.target);
          const next = this.severities[(index + step + this.severities.length) % this.severities.length];
          next.checked = true;
          next.focus();
          return;
        }
        if (event.key === "Enter" && !(event.target instanceof HTMLButtonElement)) {
          event.preventDefault();
          event.stopPropagation();
          this.save();
        } else if (event.key === "Escape") {
          event.preventDefault();
          event.stopPropagation();
          this.closeEditor();
        }
      });
      // The browser's own copy of the form was put back (annotate.js): read the marks again from the field, which
      // may have been filled before or after this cell was built.
      this.input.addEventListener("evalsite:restored", () => {
        const restored = parseValue(this.text, this.input.value);
        this.spans = restored.spans;
        this.noneBox.checked = restored.noError;
        this.render();
      });
      this.noneBox.addEventListener("change", () => {
        if (this.noneBox.checked) this.spans = [];
        this.commit();
      });
      // Enter on Edit or Remove acts on that button alone; the page's own Enter (submit when complete) must not see it.
      this.list.addEventListener("keydown", (event) => {
        if (event.key !== "Enter" || !(event.target instanceof HTMLButtonElement)) return;
        event.preventDefault();
        event.stopPropagation();
        event.target.click();
      });
      this.list.addEventListener("click", (event) => {
        const button = event.target instanceof Element ? event.target.closest("button") : null;
        const item = button ? button.closest("li") : null;
        if (!item) return;
        const index = Number(item.dataset.index);
        if (button.hasAttribute("data-span-remove")) this.remove(index);
        else if (button.hasAttribute("data-span-edit")) this.openEditor(index);
      });
    }

    // A collapsed selection only moves the caret when a pointer put it there: redrawing the text collapses the
    // browser's selection too, and that must not undo a move made with the keyboard.
    readNativeSelection(byPointer) {
      const native = window.getSelection();
      if (!native || !native.rangeCount) return;
      const range = native.getRangeAt(0);
      if (!this.textEl.contains(range.startContainer) || !this.textEl.contains(range.endContainer)) return;
      const start = offsetWithin(this.textEl, range.startContainer, range.startOffset);
      const end = offsetWithin(this.textEl, range.endContainer, range.endOffset);
      if (start === null || end === null) return;
      if (start === end) {
        if (byPointer) this.caret = this.snapDown(start);
        return;
      }
      this.setSelection(start, end);
      this.caret = this.selection ? this.selection.end : this.caret;
    }

    onKey(event) {
      if (event.altKey || event.ctrlKey || event.metaKey || event.isComposing) return;
      const key = event.key;
      let handled = true;
      if (key === "ArrowRight" || key === "ArrowLeft") {
        const next = this.step(this.caret, key === "ArrowRight" ? 1 : -1);
        if (event.shiftKey && this.anchor === null) {
          this.anchor = this.caret;
          this.anchorFromShift = true;
        } else if (!event.shiftKey && this.anchorFromShift) {
          this.anchor = null;
          this.anchorFromShift = false;
        }
        this.caret = next;
        // With an anchor (Shift held, or "s" pressed) the selection follows the caret; without one, a move drops it.
        this.setSelection(this.anchor === null ? this.caret : this.anchor, this.caret);
      } else if (key === "Home" || key === "End") {
        this.caret = key === "Home" ? 0 : this.text.length;
      } else if (key === "s") {
        this.anchor = this.caret;
        this.anchorFromShift = false;
        this.setSelection(0, 0);
      } else if (key === "e") {
        if (this.anchor !== null) this.setSelection(this.anchor, this.caret);
        this.anchor = null;
      } else if (key === "m" || key === "Enter") {
        if (this.selection) this.openEditor(this.editing);
      } else if (key === "Escape") {
        this.anchor = null;
        this.setSelection(0, 0);
      } else {
        handled = false;
      }
      if (!handled) return;
      event.preventDefault();
      event.stopPropagation();
      this.render();
    }

    showQuote() {
      const label = this.quote.dataset.label || "";
      this.quote.textContent = this.selection ? `${label}«${this.text.slice(this.selection.start, this.selection.end)}»` : "";
    }

    openEditor(index) {
      this.editing = index;
      if (index >= 0) {
        const span = this.spans[index];
        if (span.start !== null) this.setSelection(span.start, span.end);
        this.category.value = span.category;
        for (const radio of this.severities) radio.checked = radio.value === span.severity;
        this.note.value = span.note || "";
      } else if (!this.selection) {
        return;
      } else {
        this.note.value = "";
      }
      this.showQuote();
      this.editor.hidden = false;
      this.category.focus();
      this.render();
    }

    closeEditor() {
      this.editor.hidden = true;
      this.editing = -1;
      this.anchor = null;
      this.setSelection(0, 0);
      this.render();
      this.textEl.focus();
    }

    save() {
      const severity = this.severities.find((radio) => radio.checked);
      const current = this.editing >= 0 ? this.spans[this.editing] : null;
      const range = this.selection || (current ? { start: current.start, end: current.end } : null);
      if (!range || !severity) return;
      const span = {
        start: range.start,
        end: range.end,
        category: this.category.value,
        severity: severity.value,
        note: this.note.value.trim(),
      };
      if (this.editing >= 0) this.spans[this.editing] = span;
      else this.spans.push(span);
      this.noneBox.checked = false;
      this.commit();
      this.closeEditor();
    }

    remove(index) {
      this.spans.splice(index, 1);
      this.commit();
      const buttons = this.list.querySelectorAll("[data-span-remove]");
      const next = buttons[Math.min(index, buttons.length - 1)];
      if (next) next.focus();
      else this.textEl.focus();
    }

    commit() {
      const value =
        this.spans.length || this.noneBox.checked
          ? JSON.stringify({
              offsets: "utf16",
              no_error: this.noneBox.checked && !this.spans.length,
              spans: this.spans.map(({ start, end, category, severity, note }) =>
                note ? { start, end, category, severity, note } : { start, end, category, severity },
              ),
            })
          : "";
      this.input.value = value;
      this.input.dispatchEvent(new Event("change", { bubbles: true }));
      this.render();
    }

    render() {
      this.renderText();
      this.renderList();
    }

    renderText() {
      const focused = document.activeElement === this.textEl;
      const cuts = new Set([0, this.text.length]);
      for (const span of this.spans) if (span.start !== null) cuts.add(span.start).add(span.end);
      if (this.selection) cuts.add(this.selection.start).add(this.selection.end);
      const caretEnd = this.step(this.caret, 1);
      if (focused) cuts.add(this.caret).add(caretEnd);
      const points = Array.from(cuts).filter((cut) => cut >= 0 && cut <= this.text.length).sort((a, b) => a - b);
      const fragment = document.createDocumentFragment();
      for (let index = 0; index + 1 < points.length; index += 1) {
        const [from, to] = [points[index], points[index + 1]];
        const covering = this.spans.filter((span) => span.start !== null && span.start <= from && span.end >= to);
        const piece = document.createElement("span");
        piece.textContent = this.text.slice(from, to);
        if (covering.length) {
          piece.className = `span-mark span-${covering[covering.length - 1].severity}${covering.length > 1 ? " span-overlap" : ""}`;
          piece.title = covering.map((span) => `${span.category} · ${span.severity}`).join("\n");
        }
        if (this.selection && from >= this.selection.start && to <= this.selection.end) piece.classList.add("span-selected");
        if (focused && from === this.caret && to === caretEnd) piece.classList.add("span-caret");
        fragment.append(piece);
      }
      if (focused && this.caret === this.text.length) {
        const end = document.createElement("span");
        end.className = "span-caret span-caret-end";
        fragment.append(end);
      }
      this.textEl.replaceChildren(fragment);
    }

    renderList() {
      this.list.replaceChildren();
      this.spans.forEach((span, index) => {
        const item = this.itemTemplate.content.firstElementChild.cloneNode(true);
        item.dataset.index = String(index);
        item.querySelector(".span-item-text").textContent =
          span.start === null ? "—" : `«${this.text.slice(span.start, span.end)}»`;
        const categoryLabel = Array.from(this.category.options).find((option) => option.value === span.category);
        const severityLabel = this.severities.find((radio) => radio.value === span.severity);
        item.querySelector(".span-item-kind").textContent = `${categoryLabel ? categoryLabel.textContent : span.category} · ${
          severityLabel ? severityLabel.parentElement.textContent.trim() : span.severity
        }${span.note ? ` · ${span.note}` : ""}`;
        this.list.append(item);
      });
    }
  }

  function start() {
    for (const root of document.querySelectorAll("[data-span-cell]")) {
      if (!root.spanCell) root.spanCell = new SpanCell(root);
    }
  }

  // The adjudicator starts the final set from one rater's errors: the field takes them and its cell reads it again.
  document.addEventListener("click", (event) => {
    const button = event.target instanceof Element ? event.target.closest("[data-span-copy]") : null;
    if (!button) return;
    const input = document.querySelector(`[data-span-cell] input[name="${CSS.escape(button.dataset.spanTarget)}"]`);
    if (!input) return;
    input.value = button.dataset.spanCopy;
    input.dispatchEvent(new Event("evalsite:restored"));
    input.dispatchEvent(new Event("change", { bubbles: true }));
    const text = input.closest("[data-span-cell]").querySelector(".span-text");
    if (text) text.focus();
  });

  document.addEventListener("DOMContentLoaded", start);
  document.addEventListener("htmx:afterSettle", start);
})();
