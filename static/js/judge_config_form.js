/* The judge config form: the labelled fields edit the JSON view, which is what the server validates and saves.
 * Without this script the fields stay disabled and the JSON view (and the template links) still work. */
(function () {
  "use strict";

  function readJson(id) {
    var node = document.getElementById(id);
    return node ? JSON.parse(node.textContent) : {};
  }

  function init() {
    var form = document.getElementById("judgeconfig_form");
    var box = document.getElementById("id_config_json");
    if (!form || !box) return;
    var templates = readJson("judge-config-template-data");
    var datasetAspects = readJson("judge-config-dataset-aspects");
    // The model and the provider connection (the form's kept_keys): a new template keeps what was typed there.
    var keptKeys = readJson("judge-config-kept-keys");
    if (!Array.isArray(keptKeys)) keptKeys = [];
    var state = document.getElementById("judge-config-json-state");
    var invalidMessage = state ? state.getAttribute("data-invalid-message") : "";
    var aspectsBox = document.getElementById("id_aspects");
    var datasetSelect = document.getElementById("id_dataset");
    var templateSelect = document.getElementById("id_template");
    var fields = Array.prototype.slice.call(form.querySelectorAll("[data-config-key]"));

    function parsed() {
      try {
        var value = JSON.parse(box.value || "{}");
        return value && typeof value === "object" && !Array.isArray(value) ? value : null;
      } catch (e) {
        return null;
      }
    }

    function showState(problem) {
      if (state) state.textContent = problem || "";
    }

    function getPath(config, key) {
      var value = config;
      key.split(".").forEach(function (part) {
        value = value && typeof value === "object" ? value[part] : undefined;
      });
      return value;
    }

    function setPath(config, key, value) {
      var parts = key.split(".");
      var target = config;
      for (var i = 0; i < parts.length - 1; i++) {
        if (!target[parts[i]] || typeof target[parts[i]] !== "object") target[parts[i]] = {};
        target = target[parts[i]];
      }
      var last = parts[parts.length - 1];
      if (value === undefined) delete target[last];
      else target[last] = value;
    }

    function aspectInputs() {
      return aspectsBox ? Array.prototype.slice.call(aspectsBox.querySelectorAll("input[type=checkbox]")) : [];
    }

    function renderAspects(datasetId, ticked) {
      if (!aspectsBox) return;
      var rubric = datasetAspects[datasetId] || [];
      var known = {};
      var choices = rubric.map(function (pair) {
        known[pair[0]] = true;
        return { name: pair[0], label: pair[1], unknown: false };
      });
      ticked.forEach(function (name) {
        if (!known[name]) choices.push({ name: name, label: name, unknown: true });
      });
      aspectsBox.textContent = "";
      choices.forEach(function (choice, index) {
        var row = document.createElement("div");
        var label = document.createElement("label");
        var input = document.createElement("input");
        input.type = "checkbox";
        input.name = "aspects";
        input.value = choice.name;
        input.id = "id_aspects_" + index;
        input.setAttribute("data-config-key", "aspects");
        input.setAttribute("data-config-kind", "list");
        input.checked = ticked.indexOf(choice.name) !== -1;
        input.addEventListener("change", fieldChanged);
        label.htmlFor = input.id;
        label.appendChild(input);
        label.appendChild(document.createTextNode(" " + choice.label));
        if (choice.unknown) label.className = "judge-config-aspect-unknown";
        row.appendChild(label);
        aspectsBox.appendChild(row);
      });
    }

    function fieldValue(field) {
      var kind = field.getAttribute("data-config-kind");
      if (kind === "bool") return field.checked;
      if (kind === "list") {
        var names = aspectInputs().filter(function (i) { return i.checked; }).map(function (i) { return i.value; });
        return names.length ? names : undefined;
      }
      var raw = field.value.trim();
      if (raw === "") return undefined; // an empty field leaves the config type's default
      if (kind === "int" || kind === "float") {
        var number = Number(raw);
        return isNaN(number) ? raw : number; // a non-number reaches validation, which names the field
      }
      return field.tagName === "TEXTAREA" ? field.value : raw;
    }

    function fieldChanged(event) {
      var config = parsed();
      if (!config) {
        showState(invalidMessage);
        return;
      }
      var field = event.target;
      var key = field.getAttribute("data-config-key");
      setPath(config, key, fieldValue(field));
      if (key === "aspects" && config.aspects === undefined) config.aspects = null;
      box.value = JSON.stringify(config, null, 2);
      showState("");
    }

    function fillFields(config) {
      fields.forEach(function (field) {
        var key = field.getAttribute("data-config-key");
        var kind = field.getAttribute("data-config-kind");
        if (kind === "list") return;
        var value = getPath(config, key);
        if (kind === "bool") field.checked = value === true;
        else field.value = value === undefined || value === null ? "" : String(value);
      });
      var ticked = Array.isArray(config.aspects) ? config.aspects.filter(function (a) { return typeof a === "string"; }) : [];
      renderAspects(datasetSelect ? datasetSelect.value : "", ticked);
    }

    function applyTemplate(method) {
      var template = templates[method];
      if (!template) return;
      var current = parsed() || {};
      var next = JSON.parse(JSON.stringify(template));
      // What the researcher already typed survives a change of method.
      if (current.name) next.name = current.name;
      if (method !== "metric") {
        keptKeys.forEach(function (key) {
          if (current[key]) next[key] = current[key];
        });
      }
      box.value = JSON.stringify(next, null, 2);
      fillFields(next);
      showState("");
    }

    fields.forEach(function (field) {
      field.disabled = false;
      field.addEventListener(field.type === "checkbox" || field.tagName === "SELECT" ? "change" : "input", fieldChanged);
    });
    box.addEventListener("input", function () {
      var config = parsed();
      if (config) {
        fillFields(config);
        showState("");
      } else {
        showState(invalidMessage);
      }
    });
    if (templateSelect) {
      templateSelect.addEventListener("change", function () { applyTemplate(templateSelect.value); });
    }
    Array.prototype.forEach.call(document.querySelectorAll("a[data-template]"), function (link) {
      link.addEventListener("click", function (event) {
        event.preventDefault();
        if (templateSelect) templateSelect.value = link.getAttribute("data-template");
        applyTemplate(link.getAttribute("data-template"));
      });
    });
    if (datasetSelect) {
      datasetSelect.addEventListener("change", function () {
        var config = parsed() || {};
        renderAspects(datasetSelect.value, Array.isArray(config.aspects) ? config.aspects : []);
      });
    }
    Array.prototype.forEach.call(document.querySelectorAll("[data-needs-script]"), function (node) {
      node.hidden = false;
    });
    var start = parsed();
    if (start) fillFields(start);
    else showState(invalidMessage);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
