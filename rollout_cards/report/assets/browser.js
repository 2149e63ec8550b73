// Episode browser of the rollout-card report. Reads the JSON block written by page.py and
// shows package values with textContent only: nothing from the package becomes markup.
"use strict";
(function () {
  var data = JSON.parse(document.getElementById("episodes-data").textContent);
  var episodes = data.episodes;
  var scoreColumns = data.columns.filter(function (c) { return c.indexOf("score.") === 0; });
  var listBody = document.querySelector("#episode-list tbody");
  var detail = document.getElementById("episode-detail");
  var count = document.getElementById("f-count");
  var form = document.getElementById("filters");
  var fAgent = document.getElementById("f-agent");
  var fStatus = document.getElementById("f-status");
  var fTask = document.getElementById("f-task");
  var fScore = document.getElementById("f-score");
  var fMin = document.getElementById("f-min");
  var fMax = document.getElementById("f-max");

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    if (cls) { node.className = cls; }
    return node;
  }

  function distinct(column) {
    var seen = {};
    episodes.forEach(function (e) { seen[String(e[column])] = true; });
    return Object.keys(seen).sort();
  }

  function fill(select, values) {
    values.forEach(function (v) { var o = el("option", v); o.value = v; select.appendChild(o); });
  }

  fill(fAgent, distinct("agent"));
  fill(fStatus, distinct("status"));
  fill(fScore, scoreColumns);

  function scoreText(e) {
    return scoreColumns.map(function (c) {
      var v = e[c];
      return c.slice(6) + "=" + (v === null || v === undefined ? "—" : (typeof v === "number" ? +v.toFixed(4) : v));
    }).join(" ");
  }

  function matches(e) {
    if (fAgent.value && String(e.agent) !== fAgent.value) { return false; }
    if (fStatus.value && String(e.status) !== fStatus.value) { return false; }
    if (fTask.value && String(e.task_id).indexOf(fTask.value) < 0) { return false; }
    if (fScore.value) {
      var v = e[fScore.value];
      if (typeof v === "boolean") { v = v ? 1 : 0; }
      if (typeof v !== "number") { return !(fMin.value || fMax.value); }
      if (fMin.value !== "" && v < Number(fMin.value)) { return false; }
      if (fMax.value !== "" && v > Number(fMax.value)) { return false; }
    }
    return true;
  }

  function renderList() {
    while (listBody.firstChild) { listBody.removeChild(listBody.firstChild); }
    var shown = 0;
    episodes.forEach(function (e, i) {
      if (!matches(e)) { return; }
      shown += 1;
      var tr = el("tr");
      var td = el("td");
      var button = el("button", e.episode_id, "open");
      button.type = "button";
      button.setAttribute("data-index", String(i));
      button.addEventListener("click", function () { openEpisode(i); });
      td.appendChild(button);
      tr.appendChild(td);
      [e.task_id, e.agent, e.status, e.n_steps, scoreText(e)].forEach(function (v) { tr.appendChild(el("td", v)); });
      listBody.appendChild(tr);
    });
    count.textContent = shown + " of " + episodes.length + " episodes in the browser";
  }

  function stepBlock(step, resultOf, resultAt) {
    var block = el("div", null, "step kind-" + String(step.kind).replace(/[^a-z_]/g, ""));
    var depth = Number(step.depth) || 0;
    if (depth > 0) { block.classList.add("nested"); block.setAttribute("data-depth", String(Math.min(depth, 6))); }
    var head = el("div", null, "step-head");
    head.appendChild(el("span", "#" + step.seq, "seq"));
    head.appendChild(el("span", step.kind, "badge"));
    if (step.role) { head.appendChild(el("span", step.role, "role")); }
    if (step.agent) { head.appendChild(el("span", "agent " + step.agent, "role")); }
    if (step.name) { head.appendChild(el("span", step.name, "name")); }
    if (step.call_id) { head.appendChild(el("span", "call " + step.call_id, "call")); }
    if (step.is_error) { head.appendChild(el("span", "error", "flag")); }
    if (step.parent_seq !== undefined && step.parent_seq !== null) { head.appendChild(el("span", "in #" + step.parent_seq, "call")); }
    if (resultOf !== undefined) { head.appendChild(el("span", "result of #" + resultOf, "link")); }
    if (resultAt !== undefined) { head.appendChild(el("span", "result at #" + resultAt, "link")); }
    var tokens = [];
    if (step.input_tokens) { tokens.push(step.input_tokens + " in"); }
    if (step.output_tokens) { tokens.push(step.output_tokens + " out"); }
    if (step.cost_usd) { tokens.push("$" + step.cost_usd); }
    if (tokens.length) { head.appendChild(el("span", tokens.join(", "), "tokens")); }
    block.appendChild(head);
    if (step.args) { block.appendChild(el("pre", step.args, "args")); }
    if (step.content) { block.appendChild(el("pre", step.content, "content")); }
    return block;
  }

  function openEpisode(i) {
    var e = episodes[i];
    while (detail.firstChild) { detail.removeChild(detail.firstChild); }
    detail.appendChild(el("h3", e.episode_id));
    var table = el("table", null, "kv");
    data.columns.forEach(function (c) {
      var v = e[c];
      if (v === null || v === undefined || v === "") { return; }
      var tr = el("tr");
      tr.appendChild(el("th", c));
      tr.appendChild(el("td", v));
      table.appendChild(tr);
    });
    detail.appendChild(table);
    var steps = data.steps[e.episode_id] || [];
    var calls = {}, results = {};
    steps.forEach(function (s) {
      if (s.kind === "tool_call" && s.call_id) { calls[s.call_id] = s.seq; }
      if (s.kind === "tool_result" && s.call_id && calls[s.call_id] !== undefined) {
        results[calls[s.call_id]] = s.seq;
      }
    });
    var callAt = {};
    var stream = el("div", null, "stream");
    stream.setAttribute("role", "list");
    steps.forEach(function (s) {
      var resultOf;
      if (s.kind === "tool_call" && s.call_id) { callAt[s.call_id] = s.seq; }
      if (s.kind === "tool_result" && s.call_id) { resultOf = callAt[s.call_id]; }
      var block = stepBlock(s, resultOf, s.kind === "tool_call" ? results[s.seq] : undefined);
      block.setAttribute("role", "listitem");
      stream.appendChild(block);
    });
    detail.appendChild(el("h4", steps.length + " steps" + (data.truncated[e.episode_id] ? " shown, " + data.truncated[e.episode_id] + " more not embedded" : "")));
    detail.appendChild(stream);
    detail.setAttribute("data-open", e.episode_id);
  }

  form.addEventListener("submit", function (ev) { ev.preventDefault(); });
  [fAgent, fStatus, fScore].forEach(function (x) { x.addEventListener("change", renderList); });
  [fTask, fMin, fMax].forEach(function (x) { x.addEventListener("input", renderList); });
  renderList();
})();
