// Sluice's web UI behaviour. Loaded from /assets (the Content-Security-Policy allows no inline
// script). Everything user data reaches the page through textContent, never innerHTML.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

// ---- timestamps: relative text, absolute in the tooltip --------------------------------------
function relative(date) {
  const s = Math.round((Date.now() - date.getTime()) / 1000);
  const abs = Math.abs(s);
  const units = [[60, "s", 1], [3600, "min", 60], [86400, "h", 3600], [Infinity, "d", 86400]];
  for (const [limit, unit, div] of units) {
    if (abs < limit) {
      const n = Math.max(0, Math.floor(abs / div));
      if (unit === "s" && n < 10) return "just now";
      return s >= 0 ? `${n} ${unit} ago` : `in ${n} ${unit}`;
    }
  }
  return date.toISOString();
}
function renderTimes(root = document) {
  for (const el of $$("time[datetime]", root)) {
    const date = new Date(el.getAttribute("datetime"));
    if (Number.isNaN(date.getTime())) continue;
    el.textContent = relative(date);
    el.title = `${date.toLocaleString()} (${date.toISOString()})`;
  }
}
function timeElement(ms) {
  const el = document.createElement("time");
  el.setAttribute("datetime", new Date(ms).toISOString());
  renderTimes({ querySelectorAll: () => [el] });
  return el;
}

// ---- small behaviours ------------------------------------------------------------------------
document.addEventListener("click", (ev) => {
  const copy = ev.target.closest("[data-copy]");
  if (copy) {
    navigator.clipboard?.writeText(copy.dataset.copy).then(() => {
      const before = copy.textContent;
      copy.textContent = "Copied";
      setTimeout(() => { copy.textContent = before; }, 1200);
    });
  }
});
document.addEventListener("submit", (ev) => {
  const form = ev.target;
  if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
    ev.preventDefault();
    return;
  }
  if (form.dataset.busy) {
    for (const button of $$("button[type=submit]", form)) {
      button.disabled = true;
      button.textContent = form.dataset.busy;
    }
  }
});

// Keyboard: "g" then a letter goes to a page; "/" focuses the search box.
let pendingG = false;
document.addEventListener("keydown", (ev) => {
  const typing = ev.target.closest("input, textarea, select, [contenteditable], .ace_editor");
  if (typing || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  if (ev.key === "/") {
    const search = $("[data-hotkey='/']");
    if (search) { ev.preventDefault(); search.focus(); }
    return;
  }
  if (pendingG) {
    pendingG = false;
    const link = $(`[data-hotkey='g ${ev.key}']`);
    if (link) link.click();
    return;
  }
  pendingG = ev.key === "g";
});

// ---- the source page: events and logs, live from /v1 over SSE --------------------------------
function httpRequestText(event) {
  if (!event || typeof event !== "object" || !event.method || !event.headers) return null;
  const query = event.query && Object.keys(event.query).length
    ? "?" + new URLSearchParams(event.query).toString() : "";
  const lines = [`${event.method} ${event.path || "/"}${query} HTTP/1.1`];
  for (const [k, v] of Object.entries(event.headers)) lines.push(`${k}: ${v}`);
  // The body as it came (bodyRaw), not the parsed value printed again.
  const body = typeof event.bodyRaw === "string" ? event.bodyRaw
    : event.body === undefined || event.body === null ? ""
    : typeof event.body === "string" ? event.body : JSON.stringify(event.body);
  return lines.join("\n") + "\n\n" + body;
}
// A JSON value as a tree: objects and arrays fold (<details>), leaves are typed spans.
function jsonTree(value, key) {
  const label = (text) => {
    const span = document.createElement("span");
    span.className = "key";
    span.textContent = text;
    return span;
  };
  if (value !== null && typeof value === "object") {
    const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
    const node = document.createElement("details");
    node.open = entries.length <= 20;
    const summary = document.createElement("summary");
    if (key !== undefined) summary.append(label(`${key}: `));
    summary.append(Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`);
    node.append(summary);
    for (const [k, v] of entries) node.append(jsonTree(v, k));
    return node;
  }
  const row = document.createElement("div");
  if (key !== undefined) row.append(label(`${key}: `));
  const leaf = document.createElement("span");
  leaf.className = value === null ? "null" : typeof value;
  leaf.textContent = typeof value === "string" ? JSON.stringify(value) : String(value);
  row.append(leaf);
  return row;
}

// A <pre data-json-tree> of JSON (a run's trigger event) shown as the source page shows an
// event: the tree, with the JSON text folded under it.
function treeFor(pre) {
  let value;
  try {
    value = JSON.parse(pre.textContent);
  } catch {
    return;
  }
  const tree = document.createElement("div");
  tree.className = "json-tree";
  tree.append(jsonTree(value));
  const raw = document.createElement("details");
  const summary = document.createElement("summary");
  summary.textContent = "JSON";
  pre.replaceWith(tree);
  tree.after(raw);
  raw.append(summary, pre);
}

function inspect(panel, item) {
  panel.replaceChildren();
  const head = document.createElement("h3");
  const title = document.createElement("span");
  title.textContent = `Event ${item.id}`;
  const copyButton = document.createElement("button");
  copyButton.type = "button";
  copyButton.className = "small";
  copyButton.textContent = "Copy JSON";
  copyButton.dataset.copy = JSON.stringify(item.e, null, 2);
  head.append(title, copyButton);
  const meta = document.createElement("p");
  meta.className = "muted small";
  meta.append(timeElement(item.ts), ` · channel "${item.name || ""}"`);
  const tree = document.createElement("div");
  tree.className = "json-tree";
  tree.append(jsonTree(item.e));
  const rawJson = document.createElement("details");
  const rawSummary = document.createElement("summary");
  rawSummary.textContent = "JSON";
  const json = document.createElement("pre");
  json.className = "json";
  json.dataset.eventJson = "";
  json.textContent = JSON.stringify(item.e, null, 2);
  rawJson.append(rawSummary, json);
  panel.append(head, meta, tree, rawJson);
  const raw = httpRequestText(item.e);
  if (raw !== null) {
    const h = document.createElement("h4");
    h.textContent = "Raw HTTP request";
    const pre = document.createElement("pre");
    pre.dataset.rawRequest = "";
    pre.textContent = raw;
    panel.append(h, pre);
  }
}
function summaryOf(item) {
  if (item.metadata && item.metadata.summary) return String(item.metadata.summary);
  const text = JSON.stringify(item.e);
  return text.length > 120 ? text.slice(0, 117) + "…" : text;
}
function liveEvents(section) {
  const rows = $("[data-event-rows]", section);
  const empty = $("[data-events-empty]", section);
  const panel = $("[data-inspector]", section);
  const status = $("[data-live-status]", section);
  const items = new Map();
  let selected = null;
  const select = (tr) => {
    if (!tr) return;
    if (selected) selected.setAttribute("aria-selected", "false");
    selected = tr;
    tr.setAttribute("aria-selected", "true");
    tr.focus();
    inspect(panel, items.get(tr.dataset.event));
  };
  rows.addEventListener("click", (ev) => select(ev.target.closest("tr[data-event]")));
  rows.addEventListener("keydown", (ev) => {
    if (ev.key === "ArrowDown") { ev.preventDefault(); select(selected?.nextElementSibling); }
    if (ev.key === "ArrowUp") { ev.preventDefault(); select(selected?.previousElementSibling); }
  });
  const source = new EventSource(section.dataset.events);
  const opened = Date.now(); // the stored events replay first: only later ones flash
  source.onopen = () => { status.textContent = "live"; };
  source.onerror = () => { status.textContent = "reconnecting…"; };
  source.onmessage = (msg) => {
    const item = JSON.parse(msg.data);
    if (items.has(item.id)) return;
    items.set(item.id, item);
    const tr = document.createElement("tr");
    tr.dataset.event = item.id;
    tr.tabIndex = 0;
    if (Date.now() - opened > 2000) tr.className = "fresh";
    const when = document.createElement("td");
    when.append(timeElement(item.ts));
    // The clock time to the second too: two requests a moment apart were two identical
    // "just now" rows.
    const clock = document.createElement("span");
    clock.className = "muted small clock";
    clock.textContent = ` ${new Date(item.ts).toLocaleTimeString([], { hour12: false })}`;
    when.append(clock);
    const summary = document.createElement("td");
    summary.textContent = summaryOf(item);
    tr.append(when, summary);
    rows.prepend(tr);
    while (rows.children.length > 100) {
      items.delete(rows.lastElementChild.dataset.event);
      rows.lastElementChild.remove();
    }
    empty.hidden = true;
  };
  const logs = $("[data-log-lines]", section);
  const logSource = new EventSource(section.dataset.logs);
  logSource.onmessage = (msg) => {
    const line = JSON.parse(msg.data);
    const stamp = new Date(line.ts).toISOString().slice(11, 23);
    logs.append(`${stamp}  ${line.level.padEnd(5)}  ${line.msg}\n`);
    logs.scrollTop = logs.scrollHeight;
  };
}

function testRequests(form) {
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const out = form.elements.result;
    const url = new URL(form.dataset.testRequest);
    const method = form.elements.method.value;
    out.textContent = "sending…";
    try {
      const answer = await fetch(url.pathname + url.search, {
        method,
        headers: { "Content-Type": "application/json" },
        body: method === "GET" ? undefined : form.elements.body.value,
        credentials: "omit",
      });
      out.textContent = `${answer.status} ${answer.statusText}`;
    } catch (err) {
      out.textContent = String(err);
    }
  });
}

// ---- the workflow builder ----------------------------------------------------------------------
function editorFor(textarea) {
  if (!window.ace || textarea.dataset.editorReady) return;
  textarea.dataset.editorReady = "1";
  window.ace.config.set("useStrictCSP", true);
  const host = document.createElement("div");
  host.className = "ace-host";
  textarea.after(host);
  textarea.classList.add("has-editor");
  // useWorker before mode: once the mode's module is loaded, setting the mode starts its
  // syntax worker at once (a blob: worker, which the CSP refuses) unless it is already off.
  const editor = window.ace.edit(host, {
    useWorker: false,
    mode: "ace/mode/javascript",
    tabSize: 2,
    useSoftTabs: true,
    showPrintMargin: false,
    fontSize: "13px",
    value: textarea.value,
  });
  editor.session.on("change", () => { textarea.value = editor.getValue(); });
  // The save answer's error names the step (or the component) and the line (x.mjs:LINE):
  // mark it.
  const problem = textarea
    .closest("[data-step], [data-code-block]")
    ?.querySelector("[data-step-error], [data-code-error]");
  const line = problem && /\.m?[cj]s:(\d+)/.exec(problem.textContent);
  if (line) {
    const row = Number(line[1]) - 1;
    editor.session.setAnnotations([{ row, column: 0, type: "error", text: problem.textContent }]);
    editor.gotoLine(row + 1, 0, false);
  }
  editor.commands.removeCommand("gotoline"); // Ctrl+L stays the browser's
}
function builder(form) {
  const steps = $("[data-steps]", form);
  const renumber = () => {
    $$("[data-step]", steps).forEach((step, i) => {
      $("[data-step-number]", step).textContent = String(i + 1);
      const name = $("input[name='step.name']", step);
      if (!name.value) name.value = `step_${i + 1}`;
    });
  };
  // Only the chosen trigger's inputs are sent and checked: a hidden new-source form's
  // required props must not block saving an HTTP trigger.
  const showTrigger = () => {
    const chosen = $("input[name='trigger.type']:checked", form)?.value;
    for (const part of $$("[data-trigger]", form)) {
      part.hidden = part.dataset.trigger !== chosen;
      for (const input of $$("input, select, textarea", part)) input.disabled = part.hidden;
    }
  };
  form.addEventListener("change", (ev) => {
    if (ev.target.matches("[data-trigger-choice]")) showTrigger();
  });
  form.addEventListener("click", (ev) => {
    const step = ev.target.closest("[data-step]");
    if (ev.target.matches("[data-add-step]")) {
      const template = $(`template[data-step-template='${ev.target.dataset.addStep}']`, form);
      const node = template.content.firstElementChild.cloneNode(true);
      const uid = `n${Date.now()}${steps.children.length}`;
      $("input[name='step.uid']", node).value = uid;
      const action = $("input[name='step.action']", node);
      if (action) action.id = `step-action-${uid}`; // names the step to /workflows/action-props
      steps.append(node);
      window.htmx?.process(node);
      renumber();
      $$("textarea[data-editor]", node).forEach(editorFor);
      $("input[name='step.name']", node).focus();
    } else if (ev.target.matches("[data-remove]") && step) {
      step.remove();
      renumber();
    } else if (ev.target.matches("[data-move]") && step) {
      if (ev.target.dataset.move === "up" && step.previousElementSibling) {
        step.previousElementSibling.before(step);
      } else if (ev.target.dataset.move === "down" && step.nextElementSibling) {
        step.nextElementSibling.after(step);
      }
      renumber();
      ev.target.focus();
    }
  });
  // Test: the step it is pressed in is the one run up to (read by web/step_tests.py). In the
  // capture phase, so the value is set before htmx reads the form.
  form.addEventListener("click", (ev) => {
    const test = ev.target.closest("[data-test-step]");
    if (!test) return;
    $("[data-test-uid]", form).value = $("input[name='step.uid']", test.closest("[data-step]")).value;
  }, true);
  // The action picker: the list is cloned into a step's "Browse actions" the first time it
  // opens; picking one fills the step's action field, whose change loads its props form.
  form.addEventListener("toggle", (ev) => {
    const picker = ev.target;
    if (!picker.matches?.("[data-action-picker]") || !picker.open) return;
    if (!$(".action-catalog", picker)) {
      picker.append($("template[data-action-catalog]", form).content.firstElementChild.cloneNode(true));
    }
    $("[data-action-search]", picker)?.focus();
  }, true);
  // Filtering a picker (Browse actions, the new-source trigger's list) as you type.
  form.addEventListener("input", (ev) => {
    const actions = ev.target.matches("[data-action-search]");
    if (!actions && !ev.target.matches("[data-pick-search]")) return;
    const words = ev.target.value.toLowerCase().split(/\s+/).filter(Boolean);
    const catalog = actions ? ev.target.closest(".action-catalog") : ev.target.parentElement;
    const [group, item] = actions ? ["[data-action-app]", "[data-action-entry]"] : ["[data-pick-app]", "[data-pick-entry]"];
    for (const section of $$(group, catalog)) {
      const app = $("h4", section).textContent.toLowerCase();
      let shown = 0;
      for (const entry of $$(item, section)) {
        const text = `${app} ${entry.textContent.toLowerCase()}`;
        entry.hidden = !words.every((w) => text.includes(w));
        if (!entry.hidden) shown += 1;
      }
      section.hidden = shown === 0;
    }
  });
  form.addEventListener("click", (ev) => {
    const pick = ev.target.closest("[data-pick-action]");
    if (!pick) return;
    const step = pick.closest("[data-step]");
    const field = $("input[name='step.action']", step);
    field.value = pick.dataset.pickAction;
    field.dispatchEvent(new Event("change", { bubbles: true }));
    pick.closest("[data-action-picker]").open = false;
  });
  const testEvent = $("#test-event", form);
  $("[data-generate-event]", form)?.addEventListener("click", () => {
    testEvent.value = JSON.stringify(sampleEvent(form), null, 2);
  });
  $("[data-recent-events]", form)?.addEventListener("change", (ev) => {
    if (ev.target.value) testEvent.value = ev.target.value;
  });
  showTrigger();
  $$("textarea[data-editor]", steps).forEach(editorFor);
}

// A generated test event, shaped as the chosen trigger's events are (web/step_tests.py makes
// the same when the field is left empty).
function sampleEvent(form) {
  let kind = $("input[name='trigger.type']:checked", form)?.value;
  if (kind === "new_source") {
    // The picked source's kind of events (web/step_tests.sample_kind).
    kind = $("input[name='trigger.component']:checked", form)?.dataset.sample;
    if (kind === "email") return JSON.parse($("[data-generate-event]", form).dataset.emailSample);
  }
  if (kind === "http") {
    const body = { hello: "world" };
    return { method: "POST", path: "/", query: {}, headers: { "content-type": "application/json" }, bodyRaw: JSON.stringify(body), body };
  }
  if (kind === "timer") {
    const every = Number(form.elements["trigger.interval"]?.value) || null;
    return { timestamp: Math.floor(Date.now() / 1000), interval_seconds: every };
  }
  return {};
}

function credentialRows(fieldset) {
  $("[data-add-row]", fieldset).addEventListener("click", (ev) => {
    const row = $(".row", fieldset).cloneNode(true);
    for (const input of $$("input", row)) input.value = "";
    ev.target.before(row);
    $("input", row).focus();
  });
}

window.addEventListener("DOMContentLoaded", () => {
  // A form shown again with its error: its address is the page's own, not the POST's.
  const address = document.querySelector("meta[name='sluice-address']")?.content;
  if (address && address.startsWith("/") && !address.startsWith("//")) {
    history.replaceState(null, "", address + location.hash);
  }
  renderTimes();
  setInterval(renderTimes, 30000);
  document.body.addEventListener("htmx:afterSwap", (ev) => renderTimes(ev.target));
  $$("section[data-events]").forEach(liveEvents);
  $$("form[data-test-request]").forEach(testRequests);
  $$("form.builder").forEach(builder);
  $$("[data-code-block] textarea[data-editor]").forEach(editorFor);
  $$("pre[data-json-tree]").forEach(treeFor);
  $$("fieldset[data-rows]").forEach(credentialRows);
});
