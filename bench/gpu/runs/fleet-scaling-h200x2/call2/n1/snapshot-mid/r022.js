"use strict";
// Inline SVG strip chart: per (target, policy) row, one dot per correct problem's speedup on a
// log2 axis, a bar at the geomean over correct problems, and the count without a correct result.
const kbSuiteChart = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const COLORS = ["#2f6fde", "#d9480f", "#2b8a3e", "#862e9c", "#c92a2a", "#0b7285"];
  const W = 760, L = 190, R = 120, T = 16, ROW = 34, B = 40;

  function node(tag, attrs, text) {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    return n;
  }

  // rows: [{target, policy, label, geomean, speedups: [{problem, y}], missing}]
  function render(container, rows) {
    const ys = rows.flatMap((r) => r.speedups.map((p) => p.y)).concat([0.5, 2]);
    const lo = Math.floor(Math.log2(Math.min(...ys))), hi = Math.ceil(Math.log2(Math.max(...ys)));
    const H = T + B + ROW * Math.max(rows.length, 1);
    const sx = (y) => L + ((Math.log2(y) - lo) / (hi - lo || 1)) * (W - L - R);
    const svg = node("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img" });
    for (let e = lo; e <= hi; e++) {
      const x = sx(2 ** e);
      svg.append(node("line", { x1: x, y1: T, x2: x, y2: H - B, stroke: e === 0 ? "#888" : "#e3e3e3",
        "stroke-dasharray": e === 0 ? "4 3" : "" }));
      svg.append(node("text", { x, y: H - B + 16, "text-anchor": "middle", "font-size": 11 }, (2 ** e) + "x"));
    }
    svg.append(node("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle", "font-size": 12 },
      "speedup over the original (log scale)"));
    rows.forEach((r, i) => {
      const color = COLORS[i % COLORS.length], mid = T + ROW * i + ROW / 2;
      svg.append(node("text", { x: L - 8, y: mid + 4, "text-anchor": "end", "font-size": 12, fill: color },
        `${r.target} · ${r.policy} (${r.label})`));
      r.speedups.forEach((p, j) => {
        const dot = node("circle", { cx: sx(p.y), cy: mid + ((j % 5) - 2) * 3, r: 4, fill: color,
          "fill-opacity": 0.6, class: "pt" });
        dot.append(node("title", {}, `${p.problem}: ${p.y.toFixed(3)}x (${r.label})`));
        svg.append(dot);
      });
      if (r.geomean) {
        const x = sx(r.geomean);
        const bar = node("line", { x1: x, y1: mid - 12, x2: x, y2: mid + 12, stroke: color, "stroke-width": 3, class: "geomean" });
        bar.append(node("title", {}, `geomean over correct: ${r.geomean.toFixed(3)}x`));
        svg.append(bar);
      }
      svg.append(node("text", { x: W - R + 10, y: mid + 4, "font-size": 11, fill: "#666" }, `${r.missing} not correct`));
    });
    container.replaceChildren(svg);
  }
  return { render };
})();
