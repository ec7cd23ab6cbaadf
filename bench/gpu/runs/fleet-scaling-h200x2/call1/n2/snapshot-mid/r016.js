"use strict";
// A small line diff (longest common subsequence), enough for kernel regions of a few hundred lines.
const kbDiff = (() => {
  function diffLines(a, b) {
    const n = a.length, m = b.length;
    const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--)
      for (let j = m - 1; j >= 0; j--)
        lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    const out = [];
    let i = 0, j = 0;
    while (i < n && j < m) {
      if (a[i] === b[j]) { out.push(["same", a[i]]); i++; j++; }
      else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push(["del", a[i++]]);
      else out.push(["add", b[j++]]);
    }
    while (i < n) out.push(["del", a[i++]]);
    while (j < m) out.push(["add", b[j++]]);
    return out;
  }

  function render(container, before, after) {
    const ops = diffLines((before || "").split("\n"), (after || "").split("\n"));
    const pre = kb.el("div", { class: "diff", id: "diff-view" });
    const sign = { same: "  ", add: "+ ", del: "- " };
    for (const [kind, line] of ops) pre.append(kb.el("span", { class: kind }, [sign[kind] + line]));
    container.replaceChildren(pre);
    return ops;
  }
  return { diffLines, render };
})();
