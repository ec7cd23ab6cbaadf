"use strict";
// Transcript panel of the job page: the prompt and reply of every turn (generation, then
// repairs) of the pull that produced a candidate, from GET .../candidates/{id}/transcript.
const kbTranscript = (() => {
  function turnBlock(t) {
    const { el } = kb;
    const title = t.turn === 0 ? "generation" : `repair turn ${t.turn}`;
    const outcome = t.candidate_id ? `child #${t.candidate_id}` : `no child: ${t.outcome || "no usable code"}`;
    const messages = t.messages.map((m) => el("div", { class: "message" }, [
      el("div", { class: "muted" }, [m.role]), el("pre", { class: "transcript-text" }, [m.content])]));
    return el("details", { class: "turn", "data-turn": String(t.turn), open: "" }, [
      el("summary", {}, [`${title} · ${t.model} · ${t.prompt_tokens + t.completion_tokens} tokens · ${outcome}`]),
      el("details", { class: "prompt" }, [el("summary", {}, [`prompt (${t.messages.length} messages)`]), ...messages]),
      el("div", { class: "muted" }, ["reply"]), el("pre", { class: "transcript-text reply" }, [t.reply]),
    ]);
  }

  async function show(jobId, candidateId) {
    const panel = document.getElementById("transcript-panel");
    try {
      const chain = await kb.api(`/v1/jobs/${jobId}/candidates/${candidateId}/transcript`);
      const head = kb.el("p", {}, [`candidate #${candidateId}: ${chain.turns.length} turn(s) `,
        kb.el("a", { href: "#", class: "download-transcripts", onclick: (e) => { e.preventDefault(); download(jobId); } }, ["download the job's transcripts"])]);
      panel.replaceChildren(head, ...(chain.turns.length ? chain.turns.map(turnBlock)
        : [kb.el("p", { class: "muted" }, ["no transcript: the original kernel, or a rules-generator child"])]));
    } catch (err) { kb.showError(err); }
  }

  async function download(jobId) {
    try {
      const data = await kb.api(`/v1/jobs/${jobId}/transcripts`);
      const blob = new Blob([JSON.stringify(data, null, 2)], { type: "application/json" });
      const link = kb.el("a", { href: URL.createObjectURL(blob), download: `job${jobId}.transcripts.json` });
      document.body.append(link); link.click(); link.remove();
    } catch (err) { kb.showError(err); }
  }

  return { show, download };
})();
