"use strict";
// Suite page: GET /v1/suites/{id}, redrawn every 5 s until every job of the suite finished.
const suiteId = document.getElementById("suite-root").dataset.suiteId;
const pct = (v) => (v === null || v === undefined ? "-" : Number(v).toFixed(1) + "%");
const times = (v) => (v === null || v === undefined ? "-" : Number(v).toFixed(3) + "x");

function metricsRows(suite) {
  const { el } = kb;
  return suite.metrics.map((m) => el("tr", { "data-target": m.target, "data-policy": m.policy }, [
    el("td", {}, [m.target]), el("td", {}, [m.policy]), el("td", {}, [String(m.problems)]),
    el("td", {}, [String(m.finished)]), el("td", { class: "correct-pct" }, [pct(m.correct_pct)]),
    el("td", { class: "fast1-pct" }, [pct(m.fast1_pct)]),
    el("td", { class: "fast1-point-pct" }, [pct(m.fast1_point_pct)]),
    el("td", { class: "geomean-correct" }, [times(m.geomean_speedup_correct)]),
    el("td", { class: "geomean-all" }, [times(m.geomean_speedup_all)]), el("td", {}, [kb.label(m.label)]),
  ]));
}

function problemRows(suite) {
  const { el } = kb;
  return suite.problems.map((p) => el("tr", { "data-problem": p.problem, "data-correct": String(p.correct) }, [
    el("td", {}, [p.problem]), el("td", {}, [p.target]), el("td", {}, [p.policy]),
    el("td", {}, [el("a", { href: "/ui/jobs/" + p.job_id }, ["#" + p.job_id])]),
    el("td", {}, [el("span", { class: "status" }, [p.status])]), el("td", {}, [p.correct ? "yes" : "no"]),
    el("td", { class: p.significant ? "speedup significant" : "speedup", title: p.speedup_method || "" },
      [p.speedup_text || times(p.speedup)]),
    el("td", {}, [p.label ? kb.label(p.label) : "-"]),
    el("td", {}, [p.held_out || "-"]), el("td", {}, [p.reason || ""]),
  ]));
}

function failureRows(suite) {
  const { el } = kb;
  if (!suite.load_failures.length) return [el("tr", {}, [el("td", { colspan: 3, class: "muted" }, ["every problem loaded"])])];
  return suite.load_failures.map((f) => el("tr", { class: "load-failure" }, [
    el("td", {}, [f.name]), el("td", {}, [f.line === null ? "-" : String(f.line)]), el("td", {}, [f.reason]),
  ]));
}

function chartRows(suite) {
  return suite.metrics.map((m) => {
    const mine = suite.problems.filter((p) => p.target === m.target && p.policy === m.policy);
    const speedups = mine.filter((p) => p.correct && p.speedup).map((p) => ({ problem: p.problem, y: p.speedup }));
    return { target: m.target, policy: m.policy, label: m.label, geomean: m.geomean_speedup_correct,
      speedups, missing: mine.length - speedups.length };
  });
}

async function refreshSuite() {
  const suite = await kb.api("/v1/suites/" + encodeURIComponent(suiteId));
  document.getElementById("suite-name").textContent = suite.name || suite.suite_id;
  document.getElementById("suite-status").textContent = suite.finished ? "finished" : "running";
  const s = suite.settings || {};
  document.getElementById("suite-meta").textContent = `${suite.suite_id} · ${suite.format} · ` +
    `${suite.jobs_finished} / ${suite.jobs} jobs finished · targets ${(s.targets || []).join(", ")} · ` +
    `policies ${(s.policies || []).join(", ")} · budget ${s.budget ?? "-"} iterations`;
  document.querySelector("#metrics-table tbody").replaceChildren(...metricsRows(suite));
  document.querySelector("#problems-table tbody").replaceChildren(...problemRows(suite));
  document.querySelector("#failures-table tbody").replaceChildren(...failureRows(suite));
  kbSuiteChart.render(document.getElementById("suite-chart"), chartRows(suite));
  document.getElementById("suite-updated").textContent = "updated " + new Date().toLocaleTimeString();
  return suite.finished;
}

if (kb.requireToken()) {
  const loop = () => refreshSuite()
    .then((finished) => { if (!finished) setTimeout(loop, 5000); })
    .catch(kb.showError);
  loop();
}
