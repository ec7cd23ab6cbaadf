"use strict";
// Job page: follows GET /v1/jobs/{id}/events as a pushed stream (or polls ?after=N when the
// stream cannot be had); only when new events arrive does it refetch the job, its candidates
// and its bandit arms, then patches the DOM (no page reload).
const jobId = document.getElementById("job-root").dataset.jobId;  // a public id, job_...
const FINISHED = ["completed", "cancelled", "failed"];
const view = { after: 0, job: null, candidates: [], bandits: {}, diffShown: null };
window.kbPerf = [];  // poll-to-paint samples in ms: fetch start -> DOM updated

async function fetchCandidates() {
  const all = [];
  for (let offset = 0; ; offset += 1000) {
    const page = await kb.api(`/v1/jobs/${jobId}/candidates?limit=1000&offset=${offset}`);
    all.push(...page.candidates);
    if (page.candidates.length < 1000) return all;
  }
}

async function refreshData() {
  const [job, candidates, stages] = await Promise.all([
    kb.api(`/v1/jobs/${jobId}`), fetchCandidates(), kb.api(`/v1/jobs/${jobId}/stages`)]);
  const arms = await Promise.all(job.targets.map((t) => kb.api(`/v1/jobs/${jobId}/tracks/${t}/bandit`)));
  view.job = job;
  view.candidates = candidates;
  view.stages = stages;
  job.targets.forEach((t, i) => { view.bandits[t] = arms[i]; });
}

function ownMeasurement(c) {
  const ms = c.measurements.filter((m) => m.target === c.target);
  return ms.length ? ms[ms.length - 1] : null;
}

function chartSeries() {
  return view.job.targets.map((target) => {
    const children = view.candidates.filter((c) => c.target === target && c.lineage_depth > 0);
    const points = [], best = [{ x: 0, y: 1 }];
    let label = (view.job.tracks.find((t) => t.target === target)?.best || {}).label || null;
    children.forEach((c, index) => {
      const m = ownMeasurement(c);
      // a child measured without pairing against the original has no speedup, hence no point
      if (!m || m.speedup === null || m.speedup === undefined || c.status !== "measured") return;
      label = label || m.label;
      points.push({ x: index + 1, y: m.speedup, id: c.id, low: m.speedup_low, high: m.speedup_high,
        text: m.speedup_text });
      best.push({ x: index + 1, y: Math.max(best[best.length - 1].y, m.speedup) });
    });
    return { target, label: label || "no time yet", points, best };
  });
}

function renderTracks() {
  const { el, num, label } = kb;
  const job = view.job;
  document.getElementById("job-status").textContent = job.status + (job.cancel_requested && !FINISHED.includes(job.status) ? " (cancelling)" : "");
  document.getElementById("job-meta").textContent = `${job.problem.name} · policy ${job.policy} · generator ${job.model || job.generator} · created ${kb.age(job.created_at)} ago` + (job.reason ? ` · ${job.reason}` : "");
  document.getElementById("tracks-table").tBodies[0].replaceChildren(...job.tracks.map((t) => {
    const b = t.best || {};
    const diffButton = b.candidate_id ? el("button", { type: "button", class: "diff-best", onclick: () => showDiff(b.candidate_id) }, ["diff #" + b.candidate_id]) : "-";
    return el("tr", { "data-target": t.target }, [
      el("td", {}, [t.target]), el("td", {}, [t.status]),
      el("td", {}, [`${t.iterations_done} / ${job.budget.iterations}`]),
      el("td", {}, [num(t.original_time_ms, 4), b.label ? label(b.label) : ""]),
      el("td", {}, [num(b.time_ms, 4), b.label ? label(b.label) : ""]),
      speedupCell(b, b.speedup_final ? " (final re-measure)" : ""),
      el("td", {}, [b.label ? `${b.label}${b.device ? " · " + b.device : ""}${b.method ? " · " + b.method : ""}` : "-"]),
      el("td", {}, [t.held_out || "pending", t.reason ? el("div", { class: "muted" }, [t.reason]) : ""]),
      el("td", {}, [diffButton]),
    ]);
  }));
  const s = job.spend;
  document.getElementById("spend").textContent = `Spend: ${s.iterations} iterations of ${job.budget.iterations * job.targets.length} · ${s.tokens} tokens`
    + (job.budget.tokens ? ` of ${job.budget.tokens}` : "") + ` · $${s.usd.toFixed(4)}` + (s.usd_known ? "" : " (some model prices unknown)")
    + (job.budget.usd ? ` of $${job.budget.usd}` : "") + ` · wall ${s.wall_s.toFixed(1)} s`;
  document.getElementById("cancel-job").disabled = FINISHED.includes(job.status) || job.cancel_requested;
}

function renderBandit() {
  const { el, num } = kb;
  const blocks = view.job.targets.map((target) => {
    const b = view.bandits[target];
    const rows = (b ? b.arms : []).map((a) => el("tr", { class: a.masked ? "masked" : "" }, [
      el("td", {}, [String(a.cluster)]), el("td", {}, [a.strategy]), el("td", {}, [Number(a.pulls).toFixed(1)]),
      el("td", {}, [num(a.mean_reward, 3)]), el("td", {}, [a.masked ? "masked" : "open"]), el("td", {}, [num(a.ucb_score, 3)]),
    ]));
    return el("div", { class: "bandit-track", "data-target": target }, [
      // Whole pulls come from the track; the arms' counts include the prior's pseudo-counts.
      el("h3", {}, [`${target}: ${b ? b.pulls_done : 0} pulls answered (${b ? b.pulls_dispatched : 0} sent)`]),
      rows.length ? el("table", {}, [el("thead", {}, [el("tr", {}, ["Cluster", "Strategy", "Policy count (with prior)", "Mean reward", "Mask", "UCB score"].map((h) => el("th", {}, [h])))]), el("tbody", {}, rows)])
        : el("p", { class: "muted" }, ["no arm statistics yet"]),
    ]);
  });
  document.getElementById("bandit").replaceChildren(...blocks);
}

function renderStages() {
  const { el, num } = kb;
  const rows = (view.stages || []).map((s) => el("tr", { "data-stage": s.kind }, [
    el("td", {}, [s.kind]), el("td", {}, [String(s.finished) + (s.failed ? ` (${s.failed} failed)` : "")]),
    el("td", {}, [num(s.work_median_s, 3)]), el("td", {}, [num(s.work_p90_s, 3)]), el("td", {}, [num(s.work_total_s, 3)]),
    el("td", {}, [s.wait_median_s === null ? "-" : num(s.wait_median_s, 3)]),
    el("td", {}, [Object.entries(s.parts).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(", ") || "-"]),
  ]));
  document.getElementById("stages-table").tBodies[0].replaceChildren(...rows);
}

function renderCandidates() {
  const { el, num, label } = kb;
  document.getElementById("candidates-table").tBodies[0].replaceChildren(...view.candidates.map((c) => {
    const m = ownMeasurement(c);
    return el("tr", { "data-candidate": c.id }, [
      el("td", {}, [String(c.id)]), el("td", {}, [c.target]), el("td", {}, [c.parent_id === null ? "-" : String(c.parent_id)]),
      el("td", {}, [String(c.lineage_depth)]), el("td", {}, [c.strategy || (c.lineage_depth ? "free" : "original")]),
      el("td", {}, [c.status]), el("td", {}, [c.reason || "", loopNote(c)]),
      el("td", {}, m ? [num(m.time_ms, 4), label(m.label)] : ["-"]),
      m ? speedupCell(m, "") : el("td", {}, ["-"]),
      signatureCell(m && m.signature),
      el("td", {}, [el("button", { type: "button", class: "diff-candidate", onclick: () => showDiff(c.id) }, ["diff"]),
        c.lineage_depth ? el("button", { type: "button", class: "transcript-candidate", onclick: () => kbTranscript.show(jobId, c.id) }, ["transcript"]) : ""]),
    ]);
  }));
}

// A speedup as the API words it: "1.18x [1.12, 1.24]" (paired, 95% interval), "..., no
// significant speedup" (the interval contains 1.0), "1.30x estimated" (no interval) or
// "not measured" (never paired against the original; never an unpaired ratio).
function speedupCell(row, note) {
  const { el, label } = kb;
  if (!row || !row.label) return el("td", { class: "speedup" }, ["-"]);
  const cls = row.significant ? "speedup significant" : "speedup";
  return el("td", { class: cls, title: row.speedup_method || "" }, [
    (row.speedup_text || "not measured") + note, label(row.label)]);
}

// Repair turn and duplicate links of the generation loop, under the reason.
function loopNote(c) {
  const notes = [];
  if (c.turn) notes.push(`repair turn ${c.turn}` + (c.repair_of ? ` of #${c.repair_of}` : ""));
  if (c.duplicate_of) notes.push(`duplicate of #${c.duplicate_of} (not re-run)`);
  return notes.length ? kb.el("div", { class: "muted loop-note" }, [notes.join(" · ")]) : "";
}

// h as SM / DRAM / L2 % of peak, with where it came from; the note (why it is an estimate
// where ncu was wanted) shows on hover and under the numbers.
function signatureCell(sig) {
  const { el, label } = kb;
  if (!sig) return el("td", { class: "signature" }, ["-"]);
  const pct = (v) => (v >= 10 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v.toPrecision(1));
  const values = [sig.sm_pct, sig.dram_pct, sig.l2_pct].map(pct).join(" / ");
  return el("td", { class: "signature", title: sig.note || "" }, [
    values, label(sig.source), sig.note ? el("div", { class: "muted" }, [sig.note]) : ""]);
}

async function showDiff(candidateId) {
  const panel = document.getElementById("diff-panel");
  try {
    const src = await kb.api(`/ui/api/jobs/${jobId}/candidates/${candidateId}/source`);
    view.diffShown = candidateId;
    const body = kb.el("div");
    // The label of its time (measured | estimated), not the bare status, so it agrees with the result beside it.
    const state = src.status === "measured" && src.label ? src.label : src.status;
    panel.replaceChildren(kb.el("p", {}, [`candidate #${src.candidate_id} (${src.target}, ${src.strategy || "original"}, ${state}${src.reason ? ": " + src.reason : ""}) against the original kernel`]), body);
    kbDiff.render(body, src.original_editable, src.editable);
  } catch (err) { kb.showError(err); }
}

function render() {
  renderTracks();
  kbChart.render(document.getElementById("chart"), chartSeries());
  renderBandit();
  renderStages();
  renderCandidates();
  if (view.diffShown === null) {
    const best = view.job.tracks.map((t) => t.best && t.best.candidate_id).find((id) => id);
    if (best) { view.diffShown = best; showDiff(best); }
  }
}

async function poll() {
  const started = performance.now();
  const page = await kb.api(`/v1/jobs/${jobId}/events?after=${view.after}&limit=1000`);
  const changed = page.events.length > 0 || view.job === null;
  if (changed) {
    await refreshData();
    render();
    window.kbPerf.push({ ms: performance.now() - started, events: page.events.length, candidates: view.candidates.length });
  }
  view.after = page.next_after;
  document.getElementById("poll-info").textContent = `events up to #${view.after} · last poll ${new Date().toLocaleTimeString()}`;
  return page.has_more;
}

// Pushed events: the same endpoint as a text/event-stream, read with fetch (an EventSource
// cannot send the token header). Each batch of events refreshes the page as a poll would; a
// dropped stream reconnects after the last event seen, and a stream that cannot be opened
// falls back to polling. ?transport=stream never polls, ?transport=poll never streams.
const transport = new URLSearchParams(location.search).get("transport") || "auto";

async function streamEvents(onEvents) {
  const response = await fetch(`/v1/jobs/${jobId}/events?after=${view.after}`, {
    cache: "no-store", headers: { Authorization: "Bearer " + (kb.token() || ""), Accept: "text/event-stream" } });
  if (response.status === 204) return "finished";  // every event of the finished job is shown
  if (response.status === 401) { kb.api("/v1/jobs?limit=1"); throw new Error("not signed in"); }
  if (!response.ok || !response.body) throw new Error(`the event stream is unavailable (HTTP ${response.status})`);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return "ended";
    buffer += value;
    const seqs = [];
    for (let cut = buffer.indexOf("\n\n"); cut >= 0; cut = buffer.indexOf("\n\n")) {
      const id = buffer.slice(0, cut).split("\n").find((line) => line.startsWith("id: "));
      if (id) seqs.push(Number(id.slice(4)));
      buffer = buffer.slice(cut + 2);
    }
    if (seqs.length) await onEvents(seqs);
  }
}

async function onStreamed(seqs) {
  const started = performance.now();
  await refreshData();
  render();
  view.after = Math.max(view.after, ...seqs);
  window.kbPerf.push({ ms: performance.now() - started, events: seqs.length, candidates: view.candidates.length });
  document.getElementById("poll-info").textContent = `events up to #${view.after} · pushed ${new Date().toLocaleTimeString()}`;
}

function startPolling() {
  const loop = () => poll().then((more) => {
    // A finished job gets no new events; keep a slow poll so a late event still shows.
    const delay = more ? 0 : FINISHED.includes(view.job && view.job.status) ? 2500 : 1000;
    setTimeout(loop, delay);
  }).catch((err) => { kb.showError(err); setTimeout(loop, 3000); });
  loop();
}

function startStream() {
  streamEvents(onStreamed).then((how) => {
    // Ended or dropped: resume after view.after. A finished job is asked again slowly, so a
    // late event still shows (the server answers 204 while there is none).
    setTimeout(startStream, how === "finished" ? 2500 : 500);
  }).catch((err) => {
    if (transport === "stream") { kb.showError(err); setTimeout(startStream, 3000); } else startPolling();
  });
}

if (kb.requireToken()) {
  document.getElementById("cancel-job").addEventListener("click", async () => {
    try {
      await kb.api(`/v1/jobs/${jobId}/cancel`, { method: "POST" });
      document.getElementById("cancel-status").textContent = "cancellation requested";
    } catch (err) { kb.showError(err); }
  });
  if (transport === "poll" || !window.TextDecoderStream) startPolling();
  else refreshData().then(render).catch(kb.showError).finally(startStream);
}
