// groundproxy verdict inspector: vanilla JS, no dependencies. Every data call sends the admin
// key (kept in sessionStorage, this tab only) as Authorization: Bearer. Answer texts are
// untrusted: they only ever reach the page as text nodes, never as HTML.
"use strict";

const KEY_ITEM = "groundproxy.inspector.key";
const API = "/v1/groundproxy/ui";
const SVG_NS = "http://www.w3.org/2000/svg";
const CLOSERS = ".!?…\"'”’)*_";
const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function status(message, isError) {
  const s = $("status");
  s.textContent = message;
  s.className = isError ? "error" : "";
}

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(path) {
  const key = sessionStorage.getItem(KEY_ITEM);
  if (!key) throw new HttpError(401, "enter an admin key first");
  const resp = await fetch(API + path, { headers: { Authorization: "Bearer " + key } });
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const msg = (body.error && body.error.message) || resp.statusText;
    throw new HttpError(resp.status, msg);
  }
  return body;
}

function fail(err) {
  const code = err instanceof HttpError ? `${err.status}: ` : "";
  status(code + err.message, true);
}

const fmtTime = (t) => new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19);
const fmtNum = (x, d) => (x === null || x === undefined ? "–" : Number(x).toFixed(d));
// trust is null for an answer with no claims or none checked: "n/a", as the header says
const fmtTrust = (x) => (x === null || x === undefined ? "n/a" : Number(x).toFixed(2));

// ---- list ---------------------------------------------------------------------------------

async function loadList(query) {
  status("loading…");
  const params = new URLSearchParams({ limit: "50" });
  if (query) params.set("q", query);
  try {
    const body = await api("/answers?" + params);
    renderList(body, query);
  } catch (err) {
    $("answers").tBodies[0].replaceChildren();
    fail(err);
  }
}

function renderList(body, query) {
  const rows = body.data.map((a) => {
    const c = a.counts;
    const tr = el("tr", { "data-step": a.step_id, onclick: () => openAnswer(a.step_id) },
      el("td", { class: "mono", text: fmtTime(a.created) }),
      el("td", { text: a.model || "–" }),
      el("td", { text: fmtTrust(a.trust) }),
      el("td", { class: "action action-" + a.action, text: a.action }),
      el("td", { text: `${a.claims}: ${c.supported} / ${c.contradicted} / ${c.unverifiable}` }),
      el("td", { text: fmtNum(a.latency_ms, 0) }),
      el("td", { class: "mono", text: a.step_id }),
      el("td", { class: "mono", text: a.trace_id }));
    return tr;
  });
  $("answers").tBodies[0].replaceChildren(...rows);
  if (!body.traces_enabled) status("traces are disabled for this tenant (policy traces.enabled)");
  else if (!rows.length) status(query ? `nothing matches ${query}` : "no guarded answers yet");
  else status(`${rows.length} answer(s)` + (query ? ` matching ${query}` : ", newest first"));
  if (query && rows.length === 1) openAnswer(body.data[0].step_id);
}

// ---- one answer ---------------------------------------------------------------------------

function trimEnd(s) {
  let end = s.length;
  while (end > 0 && CLOSERS.includes(s[end - 1])) end -= 1;
  return end > 0 ? s.slice(0, end) : s;
}

function claimClass(claim) {
  return claim.action === "corrected" ? "corrected" : "v-" + claim.verdict;
}

// Text with marks: ranges [{start, end, cls, index}] sorted, not overlapping.
function marked(text, ranges) {
  const out = [];
  let at = 0;
  for (const r of ranges) {
    if (r.start < at) continue;
    out.push(document.createTextNode(text.slice(at, r.start)));
    const m = el("mark", { class: "claim " + r.cls, "data-claim": String(r.index),
      title: r.title, onclick: () => focusClaim(r.index) }, text.slice(r.start, r.end));
    out.push(m);
    at = r.end;
  }
  out.push(document.createTextNode(text.slice(at)));
  return out;
}

function originalRanges(claims) {
  return claims.map((c, i) => ({
    start: c.span[0], end: c.span[1], index: i, title: `${c.verdict} · ${c.action}`,
    cls: "v-" + c.verdict + (["corrected", "removed"].includes(c.action) ? " changed" : ""),
  })).sort((a, b) => a.start - b.start);
}

// Where each claim (or its correction) landed in the returned text, searched in order.
function returnedRanges(text, claims) {
  const ranges = [];
  let from = 0;
  claims.forEach((c, i) => {
    if (c.action === "removed" || c.action === "blocked") return;
    const needle = trimEnd(c.action === "corrected" && c.correction ? c.correction : c.text);
    const at = needle ? text.indexOf(needle, from) : -1;
    if (at < 0) return;
    ranges.push({ start: at, end: at + needle.length, index: i, cls: claimClass(c),
      title: `${c.verdict} · ${c.action}` });
    from = at + needle.length;
  });
  return ranges;
}

function probBar(label, cls, p) {
  const fill = el("span");
  fill.style.width = Math.round(p * 100) + "%";
  return el("span", { class: "prob" }, label, el("span", { class: "bar " + cls }, fill),
    el("span", { class: "mono", text: fmtNum(p, 2) }));
}

function claimItem(c, i) {
  const probs = c.probs || { supported: c.support, contradicted: null, unverifiable: null };
  const p = el("div", { class: "probs" },
    probBar("P(supported)", "s", probs.supported),
    ...(probs.contradicted === null ? [] : [probBar("P(contradicted)", "c", probs.contradicted),
      probBar("P(unverifiable)", "u", probs.unverifiable)]));
  const cites = el("div", { class: "citations" },
    ...c.citations.map((cit, j) => el("button", {
      type: "button", class: "cite", "data-doc": cit.doc, "data-chunk": cit.chunk,
      onclick: () => openPassage(cit), text: `[${j + 1}] ${cit.doc} · ${cit.chunk}`,
    })));
  return el("li", { "data-claim": String(i), class: "claim-item" },
    el("span", { class: "badge " + "v-" + c.verdict, text: c.verdict }),
    el("span", { class: "mono", text: c.action }), " ",
    el("q", { text: c.text }),
    c.correction ? el("div", { class: "correction", text: "→ corrected to: " + c.correction }) : "",
    p,
    el("div", { class: "explanation", text: c.explanation || "" }),
    c.judge ? judgeLine(c.judge) : "",
    c.citations.length ? cites : el("div", { class: "meta", text: "no citations" }));
}

// The LLM judge's word on an escalated claim: its verdict and quote, or why it was skipped.
function judgeLine(j) {
  if (j.skipped) {
    return el("div", { class: "judge skipped", text: `judge ${j.model || ""}: skipped (${j.skipped})` });
  }
  const was = j.verifier_verdict && j.verifier_verdict !== j.verdict
    ? ` — overturned the verifier's ${j.verifier_verdict}` : " — agrees with the verifier";
  return el("div", { class: "judge" },
    el("span", { class: "badge v-" + j.verdict, text: "judge: " + j.verdict }), " ",
    j.quote ? el("q", { text: j.quote }) : "",
    el("span", { class: "meta", text: `${was} · ${j.model} · ${fmtNum(j.ms, 0)} ms` +
      (j.cached ? " · cached" : "") + (j.reason ? " · " + j.reason : "") }));
}

function focusClaim(i) {
  document.querySelectorAll(".focus").forEach((n) => n.classList.remove("focus"));
  document.querySelectorAll(`[data-claim="${i}"]`).forEach((n) => n.classList.add("focus"));
  const item = document.querySelector(`#claims li[data-claim="${i}"]`);
  if (item) item.scrollIntoView({ block: "nearest" });
}

// A step id as the proxy makes it; anything else (a hand-edited or hostile #step=) is refused
// before it reaches a selector or a URL.
const STEP_ID = /^st_[0-9a-f]{16}$/;

async function openAnswer(stepId) {
  if (!STEP_ID.test(stepId)) {
    status(`not a step id: ${JSON.stringify(String(stepId).slice(0, 40))}`, true);
    return;
  }
  status("loading " + stepId + "…");
  for (const r of $("answers").tBodies[0].rows) {
    r.classList.toggle("selected", r.dataset.step === stepId);
  }
  let a;
  try {
    a = await api("/answers/" + encodeURIComponent(stepId));
  } catch (err) {
    fail(err);
    return;
  }
  history.replaceState(null, "", "#step=" + stepId);
  $("detail").hidden = false;
  $("passage").hidden = true;
  $("d-step").textContent = a.step_id;
  $("d-meta").textContent = [
    fmtTime(a.created) + " UTC", "model " + (a.model || "–"), "trust " + fmtTrust(a.trust),
    "action " + a.action, "guard " + fmtNum(a.latency_ms, 0) + " ms",
    "verifier " + (a.verifier || "–"), "policy " + a.policy,
    "request " + (a.request_id || "–"), "trace " + a.trace_id,
  ].join(" · ");
  const returned = a.returned === null ? "(not recorded for this answer)" : a.returned;
  $("returned").replaceChildren(...marked(returned, a.returned === null ? [] :
    returnedRanges(returned, a.claims)));
  $("original").replaceChildren(...marked(a.original, originalRanges(a.claims)));
  $("claims").replaceChildren(...a.claims.map(claimItem));
  status(`answer ${a.step_id}: ${a.claims.length} claim(s)`);
  await loadTrace(a.trace_id, a.step_id);
}

async function openPassage(cit) {
  const box = $("passage");
  $("p-source").textContent = `${cit.doc} · ${cit.chunk}`;
  if (cit.doc.startsWith("request:")) {
    $("p-text").replaceChildren("(a message of the request itself: its text is not stored)");
    box.hidden = false;
    return;
  }
  try {
    const params = new URLSearchParams({ chunk: cit.chunk });
    const body = await api("/documents/" + encodeURIComponent(cit.doc) + "?" + params);
    const pass = body.passage;
    const rel = [cit.span[0] - pass.span[0], cit.span[1] - pass.span[0]];
    const quoted = rel[0] >= 0 && rel[1] <= pass.text.length && rel[0] < rel[1]
      ? [pass.text.slice(0, rel[0]), el("mark", { text: pass.text.slice(rel[0], rel[1]) }),
        pass.text.slice(rel[1])]
      : [pass.text];
    $("p-text").replaceChildren(...quoted);
    box.hidden = false;
    box.scrollIntoView({ block: "nearest" });
  } catch (err) {
    fail(err);
  }
}

// ---- trace DAG ----------------------------------------------------------------------------

async function loadTrace(traceId, current) {
  let t;
  try {
    t = await api("/traces/" + encodeURIComponent(traceId));
  } catch (err) {
    $("trace").hidden = true;
    if (!(err instanceof HttpError && err.status === 404)) fail(err);
    return;
  }
  $("trace").hidden = false;
  $("t-id").textContent = `${t.trace_id} · ${t.nodes.length} step(s)`;
  drawDag(t, current);
  const errors = t.unsupported.map((u) => el("li", {},
    el("span", { class: "badge v-" + u.verdict, text: u.verdict }),
    el("q", { text: u.claim }), " — error step ",
    el("code", { text: u.error_step }), el("div", { class: "meta", text: u.explanation })));
  $("t-errors").replaceChildren(...(errors.length ? errors
    : [el("li", { class: "meta", text: "no claim of the final step traces back to an error step" })]));
}

function drawDag(t, current) {
  const byId = Object.fromEntries(t.nodes.map((n) => [n.step_id, n]));
  const depth = {};
  const depthOf = (id) => {
    if (depth[id] !== undefined) return depth[id];
    depth[id] = 0; // guards a cycle
    const ps = byId[id].parents.filter((p) => byId[p]);
    depth[id] = ps.length ? 1 + Math.max(...ps.map(depthOf)) : 0;
    return depth[id];
  };
  const columns = [];
  for (const n of t.nodes) (columns[depthOf(n.step_id)] ||= []).push(n.step_id);
  const W = 270, H = 56, GX = 70, GY = 22, PAD = 16;
  const pos = {};
  columns.forEach((ids, x) => ids.forEach((id, y) => {
    pos[id] = { x: PAD + x * (W + GX), y: PAD + y * (H + GY) };
  }));
  const rows = Math.max(...columns.map((c) => c.length));
  const dag = $("dag");
  const width = PAD * 2 + columns.length * (W + GX) - GX, height = PAD * 2 + rows * (H + GY) - GY;
  dag.setAttribute("viewBox", `0 0 ${width} ${height}`);
  dag.setAttribute("width", String(width)); // drawn at its own size, never scaled up
  dag.setAttribute("height", String(height));
  const errorSteps = new Set(t.unsupported.map((u) => u.error_step));
  const defs = svg("defs");
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#8c95a3" }));
  defs.append(marker);
  const parts = [defs];
  for (const n of t.nodes) {
    for (const p of n.parents) {
      if (!pos[p]) continue;
      const a = pos[p], b = pos[n.step_id];
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
      parts.push(svg("path", { class: "edge", d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}` }));
    }
  }
  for (const n of t.nodes) {
    const p = pos[n.step_id];
    const cls = ["node", errorSteps.has(n.step_id) ? "error-step" : "",
      n.step_id === current ? "current" : ""].join(" ").trim();
    const g = svg("g", { class: cls, "data-step": n.step_id, transform: `translate(${p.x} ${p.y})` });
    g.addEventListener("click", () => openAnswer(n.step_id));
    const bad = n.claims.filter((c) => c.verdict !== "supported").length;
    g.append(svg("rect", { width: W, height: H }),
      svg("text", { x: 10, y: 19, class: "mono" }, n.step_id),
      svg("text", { x: 10, y: 37, class: "sub" },
        `${n.action} · trust ${fmtTrust(n.trust)} · ${bad}/${n.claims.length} not supported`));
    if (errorSteps.has(n.step_id)) g.append(svg("text", { x: 10, y: 50, class: "err" }, "error step"));
    parts.push(g);
  }
  dag.replaceChildren(...parts);
}

// ---- wiring -------------------------------------------------------------------------------

function fromHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  return { step: h.get("step"), q: h.get("q") };
}

function start() {
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const key = $("key").value.trim();
    if (!key) return;
    sessionStorage.setItem(KEY_ITEM, key);
    $("key").value = "";
    $("detail").hidden = true;
    loadList($("q").value.trim());
  });
  $("forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_ITEM);
    $("answers").tBodies[0].replaceChildren();
    $("detail").hidden = true;
    status("key forgotten");
  });
  $("search-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const q = $("q").value.trim();
    history.replaceState(null, "", q ? "#q=" + encodeURIComponent(q) : "#");
    loadList(q);
  });
  $("recent").addEventListener("click", () => {
    $("q").value = "";
    loadList("");
  });
  $("p-close").addEventListener("click", () => { $("passage").hidden = true; });
  if (!sessionStorage.getItem(KEY_ITEM)) {
    status("enter an admin key of your tenant to see its guarded answers");
    return;
  }
  const { step, q } = fromHash();
  if (q) $("q").value = q;
  loadList(q || "").then(() => (step ? openAnswer(step) : null)).catch(fail);
}

document.addEventListener("DOMContentLoaded", start);
