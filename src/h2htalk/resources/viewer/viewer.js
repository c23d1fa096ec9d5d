// The h2htalk results viewer: a static page that opens from disk. Its data are JavaScript files that call
// H2H.run (the index) and H2H.data (one cell's answers, one variant's prompts), loaded by <script> on demand:
// Chromium lets a page opened from file:// run scripts beside it, but not fetch() them. Everything a model or
// a reference wrote is inserted as text (textContent, Text nodes), never parsed as HTML, and its invisible
// characters are shown as tokens such as 〚U+202E〛, never applied.
"use strict";

const H2H = (() => {
  const PAGE_SIZE = 50;
  const FLAG_NAMES = {
    cut_off: "cut off at the token limit",
    failed: "failed: no answer came",
    truncated_in_reasoning: "cut off while reasoning",
    no_final_answer: "no answer after the reasoning",
    review: "sent to review",
    judge_missing: "no readable judge answer",
    judge_cut_off: "judge cut off",
    ambiguous_verdict: "judge gave two verdicts",
    unparseable_sample: "a judge sample unreadable",
    empty_response: "empty answer",
    empty_reference: "empty reference",
    skipped: "not scored",
  };
  const SERIOUS = new Set(["cut_off", "failed", "truncated_in_reasoning", "no_final_answer"]);
  const METRICS = [
    ["bleu1", "BLEU-1"], ["bleu2", "BLEU-2"], ["bleu3", "BLEU-3"], ["bleu4", "BLEU-4"],
    ["rouge1", "ROUGE-1"], ["rougeL", "ROUGE-L"], ["ss", "SS"], ["S", "S"],
  ];
  const SORTS = [
    ["order", "item order"],
    ["S-desc", "S, high to low"],
    ["S-asc", "S, low to high"],
    ["J-desc", "J, high to low"],
    ["J-asc", "J, low to high"],
  ];

  const store = new Map();
  const pending = new Map();
  let index = null;
  let shown = 0; // the latest request: an older one that finishes later is dropped

  // --- data ------------------------------------------------------------------------------------------------

  function run(payload) {
    index = payload;
  }

  function data(key, payload) {
    store.set(key, payload);
  }

  function load(key) {
    if (store.has(key)) return Promise.resolve(store.get(key));
    if (!pending.has(key)) {
      pending.set(key, new Promise((resolve, reject) => {
        const script = document.createElement("script");
        script.src = "data/" + key.split("/").map(encodeURIComponent).join("/") + ".js";
        script.onload = () => (store.has(key) ? resolve(store.get(key)) : reject(new Error(script.src)));
        script.onerror = () => {
          pending.delete(key);
          reject(new Error(script.src));
        };
        document.head.append(script);
      }));
    }
    return pending.get(key);
  }

  // --- small helpers ---------------------------------------------------------------------------------------

  // Every format and control character but the tab and the line breaks (a carriage return only before a line
  // feed): a bidi override (U+202E) would reverse the rest of an answer, a zero-width space hide a difference.
  // The review desk marks the same characters (h2htalk/review/visible.py).
  const INVISIBLE = /(?![\t\n\r])[\p{Cc}\p{Cf}]|\r(?!\n)/gu;

  function visible(text) {
    return text.replace(INVISIBLE, (ch) => `〚U+${ch.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}〛`);
  }

  // An element; its children are nodes or strings, and a string always becomes a Text node, made visible.
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "class") node.className = value;
      else if (key === "open") node.open = Boolean(value);
      else node.setAttribute(key, value);
    }
    for (const child of children.flat()) {
      if (typeof child === "string") node.append(visible(child));
      else if (child !== null && child !== undefined && child !== false) node.append(child);
    }
    return node;
  }

  function number(value, digits = 2) {
    return value === null || value === undefined ? "–" : Number(value).toFixed(digits);
  }

  function interval(low, high) {
    return low === null || low === undefined ? "" : ` [${number(low)}, ${number(high)}]`;
  }

  function flagName(flag) {
    return FLAG_NAMES[flag] || flag.replaceAll("_", " ");
  }

  function badge(flag) {
    const serious = SERIOUS.has(flag) || flag.startsWith("leak");
    return el("span", { class: serious ? "badge serious" : "badge", "data-flag": flag }, flagName(flag));
  }

  function options(select, choices, value) {
    select.replaceChildren(...choices.map(([key, label]) => el("option", { value: key }, label)));
    select.value = choices.some(([key]) => key === value) ? value : choices.length ? choices[0][0] : "";
  }

  // --- state: the address's hash holds what is shown, so a view can be linked and reloaded -------------------

  function state() {
    const params = new URLSearchParams(location.hash.slice(1));
    const pick = (name, keys) => (keys.includes(params.get(name)) ? params.get(name) : keys[0]);
    return {
      model: pick("model", index.models.map((m) => m.name)),
      variant: pick("variant", index.variants.map((v) => v.key)),
      subtask: pick("subtask", index.subtasks.map((s) => s.key)),
      embedder: pick("embedder", index.embedders),
      flag: params.get("flag") || "all",
      sort: params.get("sort") || "order",
      page: Math.max(1, parseInt(params.get("page") || "1", 10) || 1),
    };
  }

  function go(changes) {
    const next = { ...state(), page: 1, ...changes };
    location.hash = new URLSearchParams(Object.entries(next).map(([k, v]) => [k, String(v)])).toString();
  }

  // --- rendering -------------------------------------------------------------------------------------------

  function $(id) {
    return document.getElementById(id);
  }

  function header() {
    const parts = [`run of ${index.date}`, `config ${index.config_sha256.slice(0, 12)}`];
    if (index.git_hash) parts.push(`git ${index.git_hash.slice(0, 12)}${index.git_dirty ? " (local changes)" : ""}`);
    parts.push(`judged Levels I-III show ${index.judged_cell}`);
    $("run").textContent = visible(parts.join(" · "));
    $("notes").textContent = visible(index.notes.join(" "));
  }

  function summaryOf(cell, embedder) {
    const summary = cell.summary[embedder];
    if (!summary) return [el("span", { class: "empty" }, "No scores for this embedder.")];
    const parts = [
      el("span", { class: "part value" },
        `${summary.measure} ${number(summary.value)}${interval(summary.ci_low, summary.ci_high)}`),
    ];
    if (summary.measure !== "S") {
      parts.push(el("span", { class: "part" }, `S ${number(summary.S.value)}${interval(summary.S.ci_low, summary.S.ci_high)}`));
    }
    parts.push(el("span", { class: "part" }, `n ${summary.n} of ${summary.expected}`));
    parts.push(el("span", { class: "part" }, `cut off ${summary.cut_off}`));
    parts.push(el("span", { class: "part" }, `failed ${summary.failed}`));
    if (summary.to_review !== undefined) parts.push(el("span", { class: "part" }, `to review ${summary.to_review}`));
    return parts;
  }

  function metricsTable(scores) {
    return el("table", { class: "metrics" },
      el("tr", {}, METRICS.map(([, label]) => el("th", {}, label))),
      el("tr", {}, METRICS.map(([key]) => el("td", { class: key === "S" ? "total" : "" }, number(scores[key])))));
  }

  function judgeBlock(judge) {
    const samples = judge.samples.map((s) => (s === null ? "–" : String(s))).join(", ");
    const lines = [
      el("p", {}, `Judge ${number(judge.score)} of 5${judge.human ? " (people's score)" : ""} · samples ${samples}`
        + ` · J ${number(judge.J100)}`),
    ];
    if (judge.review) lines.push(el("p", {}, `Review: ${judge.review_reasons.join("; ")}`));
    lines.push(el("p", {}, "Evidence: ", judge.evidence || "–"));
    return el("div", { class: "judge" }, lines);
  }

  function card(row) {
    const { item, prompt, scored } = row;
    const flags = scored.flags;
    const headline = [el("span", { class: "headline" }, `S ${number(scored.scores.S)}`)];
    if (scored.judge) headline.push(el("span", { class: "headline" }, `J ${number(scored.judge.J100)}`));
    const texts = el("div", { class: "texts" },
      el("div", { class: "answer" }, el("h3", {}, "Answer"), el("pre", {}, item.answer)),
      el("div", { class: "reference" }, el("h3", {}, "Reference"), el("pre", {}, prompt.reference)));
    return el("li", { class: "item", "data-id": item.id },
      el("header", {}, el("span", { class: "id" }, item.id), headline, flags.map(badge)),
      item.failure ? el("p", { class: "failure" }, `No answer: ${item.failure.kind}: ${item.failure.message || ""}`) : null,
      texts,
      item.reasoning ? el("details", { class: "reasoning" }, el("summary", {}, "Reasoning"), el("pre", {}, item.reasoning)) : null,
      metricsTable(scored.scores),
      scored.judge ? judgeBlock(scored.judge) : null,
      el("details", { class: "system" }, el("summary", {}, `System prompt (${prompt.system.length} characters)`),
        el("pre", {}, prompt.system)),
      el("details", { class: "user", open: true }, el("summary", {}, "User message"), el("pre", {}, prompt.user)));
  }

  function sortValue(row, measure) {
    if (measure === "S") return row.scored.scores.S;
    return row.scored.judge ? row.scored.judge.J100 : null;
  }

  function arrange(rows, flag, sort) {
    let kept = rows;
    if (flag === "any") kept = rows.filter((r) => r.scored.flags.length);
    else if (flag === "none") kept = rows.filter((r) => !r.scored.flags.length);
    else if (flag !== "all") kept = rows.filter((r) => r.scored.flags.includes(flag));
    if (sort === "order") return kept;
    const [measure, direction] = sort.split("-");
    const sign = direction === "asc" ? 1 : -1;
    return [...kept].sort((a, b) => {
      const x = sortValue(a, measure);
      const y = sortValue(b, measure);
      if (x === null || x === undefined) return y === null || y === undefined ? a.position - b.position : 1;
      if (y === null || y === undefined) return -1;
      return sign * (x - y) || a.position - b.position;
    });
  }

  async function show() {
    const request = ++shown;
    const st = state();
    options($("model"), index.models.map((m) => [m.name, m.display_name]), st.model);
    options($("variant"), index.variants.map((v) => [v.key, v.name]), st.variant);
    options($("subtask"), index.subtasks.map((s) => [s.key, s.name]), st.subtask);
    options($("embedder"), index.embedders.map((e) => [e, e]), st.embedder);
    $("embedder-choice").hidden = index.embedders.length < 2;
    const cell = index.cells[`${st.model}/${st.variant}/${st.subtask}`];
    $("problem").hidden = true;
    if (!cell) {
      $("summary").replaceChildren();
      $("items").replaceChildren();
      $("problem").textContent = "This run has no such cell.";
      $("problem").hidden = false;
      return;
    }
    let answers, prompts;
    try {
      [answers, prompts] = await Promise.all([load(cell.answers), load(cell.prompts)]);
    } catch (error) {
      if (request !== shown) return;
      $("problem").textContent = `A data file of this bundle is missing: ${error.message}`;
      $("problem").hidden = false;
      return;
    }
    if (request !== shown) return;
    const rows = answers.items.map((item, position) => {
      const prompt = prompts.items[item.id] || { system: -1, user: "", reference: "" };
      return {
        item, position, scored: item.scored[st.embedder],
        prompt: { ...prompt, system: prompts.systems[prompt.system] || "" },
      };
    }).filter((row) => row.scored);
    const counts = new Map();
    for (const row of rows) for (const flag of row.scored.flags) counts.set(flag, (counts.get(flag) || 0) + 1);
    if (st.flag !== "all" && st.flag !== "any" && st.flag !== "none" && !counts.has(st.flag)) counts.set(st.flag, 0);
    options($("flag"), [
      ["all", `all items (${rows.length})`],
      ["any", `any flag (${rows.filter((r) => r.scored.flags.length).length})`],
      ["none", `no flag (${rows.filter((r) => !r.scored.flags.length).length})`],
      ...[...counts].map(([flag, count]) => [flag, `${flagName(flag)} (${count})`]),
    ], st.flag);
    options($("sort"), SORTS.filter(([key]) => cell.judged || !key.startsWith("J")), st.sort);
    const arranged = arrange(rows, $("flag").value, $("sort").value);
    const pages = Math.max(1, Math.ceil(arranged.length / PAGE_SIZE));
    const page = Math.min(st.page, pages);
    const first = (page - 1) * PAGE_SIZE;
    const visible = arranged.slice(first, first + PAGE_SIZE);
    $("summary").replaceChildren(...summaryOf(cell, st.embedder));
    $("items").replaceChildren(...visible.map(card));
    if (!visible.length) $("items").replaceChildren(el("li", { class: "empty" }, "No item matches."));
    $("page").textContent = arranged.length
      ? `items ${first + 1}–${first + visible.length} of ${arranged.length} · page ${page} of ${pages}`
      : "";
    $("previous").disabled = page <= 1;
    $("next").disabled = page >= pages;
    document.body.dataset.ready = location.hash || "#"; // what is shown now (tests wait for it)
  }

  function start() {
    if (!index) {
      $("problem").textContent = "This bundle's index (data/run.js) did not load.";
      $("problem").hidden = false;
      return;
    }
    header();
    for (const name of ["model", "variant", "subtask", "embedder", "flag", "sort"]) {
      $(name).addEventListener("change", (event) => go({ [name]: event.target.value }));
    }
    $("previous").addEventListener("click", () => go({ page: state().page - 1 }));
    $("next").addEventListener("click", () => go({ page: state().page + 1 }));
    window.addEventListener("hashchange", show);
    show();
  }

  document.addEventListener("DOMContentLoaded", start);
  return { run, data };
})();
