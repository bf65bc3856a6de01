// selfplay report: the trajectory viewer. Every value comes from the episode-data JSON block and is put on
// the page with textContent (never innerHTML): episodes hold model-written text, which is hostile.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("episode-data").textContent);
  var episodes = data.episodes;
  var byId = new Map(episodes.map(function (e) { return [e.id, e]; }));
  var list = document.querySelector("#episode-list tbody");
  var view = document.getElementById("episode-view");
  var status = document.getElementById("viewer-status");
  var filters = {
    role: document.getElementById("filter-role"), repo: document.getElementById("filter-repo"),
    reward: document.getElementById("filter-reward"), text: document.getElementById("filter-text")
  };

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }
  function fmt(v) {
    if (v === null || v === undefined) { return "–"; }
    if (typeof v === "number") { return Number.isInteger(v) ? String(v) : v.toPrecision(4).replace(/\.?0+$/, ""); }
    if (typeof v === "object") { return JSON.stringify(v); }
    return String(v);
  }
  function options(select, values) {
    values.forEach(function (v) { var o = el("option", null, v); o.value = v; select.appendChild(o); });
  }
  function distinct(key) {
    return Array.from(new Set(episodes.map(function (e) { return e[key] || ""; }))).filter(Boolean).sort();
  }

  function matches(e) {
    if (filters.role.value && e.role !== filters.role.value) { return false; }
    if (filters.repo.value && e.repo !== filters.repo.value) { return false; }
    var r = filters.reward.value;
    if (r === "positive" && !(e.reward > 0)) { return false; }
    if (r === "nonpositive" && !(e.reward !== null && e.reward <= 0)) { return false; }
    if (r === "none" && e.reward !== null) { return false; }
    var q = filters.text.value.trim().toLowerCase();
    if (q) {
      var hay = [e.id, e.task_id, e.termination, e.strategy].join(" ").toLowerCase();
      if (hay.indexOf(q) < 0) { return false; }
    }
    return true;
  }

  function renderList() {
    list.textContent = "";
    var shown = 0;
    episodes.forEach(function (e) {
      if (!matches(e)) { return; }
      shown += 1;
      var tr = el("tr");
      tr.dataset.id = e.id;
      tr.title = e.id;
      var link = el("a", null, shortId(e.id));
      link.href = "#episode=" + encodeURIComponent(e.id);  // a fragment: nothing in an id can leave the page
      var first = el("td");
      first.appendChild(link);
      tr.appendChild(first);
      [e.iteration, e.role, e.repo, fmt(e.reward), e.termination, e.turns, e.tokens].forEach(function (v) {
        tr.appendChild(el("td", null, fmt(v)));
      });
      tr.addEventListener("click", function () { location.hash = "episode=" + encodeURIComponent(e.id); });
      list.appendChild(tr);
    });
    status.textContent = shown + " of " + episodes.length + " embedded episodes match (" + data.total +
      " in the run). Click one, or open #episode=<id>.";
    markSelected();
  }

  function shortId(id) {
    var prefix = data.run_id + "-";
    return id.indexOf(prefix) === 0 ? id.slice(prefix.length) : id;
  }

  function markSelected() {
    var id = currentId();
    Array.prototype.forEach.call(list.children, function (tr) {
      tr.classList.toggle("selected", tr.dataset.id === id);
    });
  }

  function currentId() {
    var m = /(?:^#|&)episode=([^&]*)/.exec(location.hash);
    if (!m) { return null; }
    try { return decodeURIComponent(m[1]); } catch (err) { return null; }
  }

  function fields(e) {
    var dl = el("dl");
    ["id", "role", "repo", "iteration", "reward", "termination", "turns", "tokens", "sampled_tokens",
     "policy_version", "strategy", "order", "task_id", "group_id", "infra_failure", "format_errors", "error",
     "source"].forEach(function (k) {
      if (e[k] === undefined || e[k] === null) { return; }
      dl.appendChild(el("dt", null, k));
      dl.appendChild(el("dd", null, fmt(e[k])));
    });
    return dl;
  }

  function pre(text, cls) { return el("pre", cls, text); }

  function diffBlock(text) {
    var block = el("pre", "diff");
    String(text).split("\n").forEach(function (line) {
      var cls = /^(\+\+\+ |--- |diff --git )/.test(line) ? "file" : line.startsWith("+") ? "add" :
        line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : null;
      block.appendChild(el("span", cls, line + "\n"));
    });
    return block;
  }

  function grading(e) {
    var box = el("div", "grading");
    if (e.grade) {
      var g = e.grade;
      box.appendChild(el("h4", null, "Grade"));
      box.appendChild(el("p", g.resolved ? "pass" : "fail",
        (g.resolved ? "resolved" : "not resolved") + " · reward " + fmt(g.reward)));
      ["error", "tamper", "integrity"].forEach(function (k) {
        if (g[k]) { box.appendChild(el("p", null, k + ": " + fmt(g[k]))); }
      });
      (g.dropped_hunks || []).forEach(function (h) { box.appendChild(el("p", null, "dropped: " + fmt(h))); });
      var tests = g.tests || {};
      var names = Object.keys(tests);
      if (names.length) {
        var t = el("table", "data");
        names.forEach(function (n) {
          var tr = el("tr");
          tr.appendChild(el("td", null, n));
          tr.appendChild(el("td", tests[n] === "passed" ? "pass" : "fail", fmt(tests[n])));
          t.appendChild(tr);
        });
        box.appendChild(t);
      }
    }
    if (e.validation) {
      var v = e.validation;
      box.appendChild(el("h4", null, "Validation"));
      box.appendChild(el("p", v.valid ? "pass" : "fail", v.valid ? "valid" :
        "invalid" + (v.failed_check ? " (failed check: " + fmt(v.failed_check) + ")" : "")));
      if (v.error) { box.appendChild(el("p", null, "error: " + fmt(v.error))); }
      var checks = el("table", "data");
      (v.checks || []).forEach(function (c) {
        var tr = el("tr");
        tr.appendChild(el("td", null, fmt(c.name)));
        tr.appendChild(el("td", c.passed ? "pass" : "fail", c.passed ? "passed" : "failed"));
        tr.appendChild(el("td", null, fmt(c.detail)));
        checks.appendChild(tr);
      });
      box.appendChild(checks);
    }
    return box;
  }

  function submission(sub) {
    var box = el("div", "submission");
    if (typeof sub === "string") { box.appendChild(sub ? diffBlock(sub) : el("p", "none", "(empty diff)")); return box; }
    Object.keys(sub).forEach(function (name) {
      var d = el("details");
      d.open = /\.diff$/.test(name);
      d.appendChild(el("summary", null, name));
      d.appendChild(/\.diff$/.test(name) ? diffBlock(sub[name]) : pre(fmt(sub[name])));
      box.appendChild(d);
    });
    return box;
  }

  function messages(e) {
    var box = el("div", "messages");
    var turn = 0;
    (e.messages || []).forEach(function (m, i) {
      var kind = m.role === "assistant" ? "assistant" : m.role === "note" ? "note" :
        i < 2 ? "prompt" : "observation";
      var label = kind === "assistant" ? "turn " + (++turn) : kind === "observation" ? "observation " + turn :
        kind === "prompt" ? m.role + " prompt" : "note";
      var div = el("div", "msg " + kind);
      div.appendChild(el("div", "label", label));
      if (m.command !== undefined) { div.appendChild(pre("$ " + m.command, "command")); }
      div.appendChild(pre(m.content));
      box.appendChild(div);
    });
    return box;
  }

  function show() {
    var id = currentId();
    markSelected();
    if (id === null) { view.hidden = true; return; }
    var e = byId.get(id);
    view.textContent = "";
    view.hidden = false;
    if (!e) {
      view.appendChild(el("p", "fail", "Episode " + id + " is not embedded in this page (only the newest " +
        data.limits.max_episodes + " are)."));
      return;
    }
    view.dataset.episode = e.id;
    view.appendChild(el("h3", null, e.role + " episode " + e.id));
    view.appendChild(fields(e));
    view.appendChild(el("h4", null, "Reward and grading"));
    view.appendChild(el("p", null, "reward " + fmt(e.reward) + " · ended by " + fmt(e.termination)));
    view.appendChild(grading(e));
    if (e.submission !== undefined) {
      view.appendChild(el("h4", null, "Submission"));
      view.appendChild(submission(e.submission));
    }
    view.appendChild(el("h4", null, "Prompt, turns and observations"));
    view.appendChild(messages(e));
    if (e.unsent_observation) {
      view.appendChild(el("h4", null, "Last observation (did not fit the context)"));
      view.appendChild(pre(e.unsent_observation));
    }
    view.scrollIntoView({block: "nearest"});
  }

  options(filters.role, distinct("role"));
  options(filters.repo, distinct("repo"));
  ["change", "input"].forEach(function (ev) {
    Object.keys(filters).forEach(function (k) { filters[k].addEventListener(ev, renderList); });
  });
  window.addEventListener("hashchange", show);
  renderList();
  show();
  document.body.dataset.viewer = "ready";
})();
