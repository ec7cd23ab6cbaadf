"use strict";
// Jobs page: the list is polled every 2 s and rows are patched in place (no page reloads).
const rows = new Map();

function bestCell(job) {
  const cell = kb.el("td");
  for (const t of job.tracks) {
    const b = t.best;
    const text = b ? b.speedup_text || "not measured" : "-";  // with its interval, or labelled
    cell.append(kb.el("div", {}, [t.target + ": " + text, b && b.label ? kb.label(b.label) : ""]));
  }
  return cell;
}

function problemCell(job) {
  // Jobs of a suite created by POST /v1/suites link to the suite page (other labels stay text).
  const suite = job.suite && job.suite.startsWith("suite-")
    ? kb.el("a", { href: "/ui/suites/" + encodeURIComponent(job.suite), class: "suite-link" }, [job.suite])
    : job.suite || "";
  return kb.el("td", {}, [job.problem.name, suite ? kb.el("div", { class: "muted" }, [suite]) : ""]);
}

function jobRow(job) {
  const { el } = kb;
  const done = job.tracks.reduce((n, t) => n + t.iterations_done, 0);
  const total = job.budget.iterations * job.targets.length;
  const usd = job.spend.usd.toFixed(4) + (job.spend.usd_known ? "" : " (partly unknown)");
  return el("tr", { "data-job-id": job.id, "data-status": job.status }, [
    el("td", {}, [el("a", { href: "/ui/jobs/" + job.id }, ["#" + job.id])]),
    problemCell(job), el("td", {}, [el("span", { class: "status" }, [job.status])]),
    el("td", {}, [job.targets.join(", ")]), bestCell(job),
    el("td", {}, [done + " / " + total + " iterations"]), el("td", {}, [String(job.spend.tokens)]),
    el("td", {}, [usd]), el("td", {}, [job.owner]), el("td", {}, [kb.age(job.created_at)]),
  ]);
}

async function refreshJobs() {
  const params = new URLSearchParams();
  const status = document.getElementById("filter-status").value;
  const target = document.getElementById("filter-target").value;
  if (status) params.set("status", status);
  if (target) params.set("target", target);
  const jobs = await kb.api("/ui/api/jobs?" + params);
  const body = document.querySelector("#jobs-table tbody");
  const seen = new Set();
  jobs.forEach((job, index) => {
    seen.add(job.id);
    const fresh = jobRow(job);
    const old = rows.get(job.id);
    if (old) old.replaceWith(fresh); else body.insertBefore(fresh, body.children[index] || null);
    rows.set(job.id, fresh);
  });
  for (const [id, row] of rows) if (!seen.has(id)) { row.remove(); rows.delete(id); }
  document.getElementById("jobs-updated").textContent = jobs.length + " jobs · updated " + new Date().toLocaleTimeString();
}

function optionalNumber(id) {
  const v = document.getElementById(id).value;
  return v === "" ? null : Number(v);
}

async function submitJob(event) {
  event.preventDefault();
  const status = document.getElementById("submit-status");
  const targets = [...document.querySelectorAll("input[name=target]:checked")].map((i) => i.value);
  const body = {
    problem: { source: document.getElementById("problem-source").value,
      format: document.getElementById("problem-format").value, name: document.getElementById("problem-name").value },
    targets, policy: document.getElementById("policy").value,
    budget: { iterations: Number(document.getElementById("budget-iterations").value),
      tokens: optionalNumber("budget-tokens"), usd: optionalNumber("budget-usd") },
    parallelism: Number(document.getElementById("parallelism").value),
  };
  status.textContent = "Validating the problem in the sandbox…";
  try {
    const job = await kb.api("/v1/jobs", { method: "POST", body: JSON.stringify(body) });
    status.replaceChildren("Submitted ", kb.el("a", { href: "/ui/jobs/" + job.id, id: "submitted-link" }, ["job #" + job.id]));
    await refreshJobs();
  } catch (err) {
    status.textContent = "Not submitted: " + err.message;
  }
}

if (kb.requireToken()) {
  document.getElementById("submit-form").addEventListener("submit", submitJob);
  document.getElementById("problem-file").addEventListener("change", async (event) => {
    const file = event.target.files[0];
    if (!file) return;
    document.getElementById("problem-source").value = await file.text();
    document.getElementById("problem-name").value = file.name.replace(/\.py$/, "").replace(/[^A-Za-z0-9_.-]/g, "_");
  });
  for (const id of ["filter-status", "filter-target"]) {
    document.getElementById(id).addEventListener("change", () => refreshJobs().catch(kb.showError));
  }
  const loop = () => refreshJobs().catch(kb.showError).finally(() => setTimeout(loop, 2000));
  loop();
}
