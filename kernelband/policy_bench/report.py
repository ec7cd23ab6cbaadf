"""Render the policy benchmark: the curves' plot and the markdown tables."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from kernelband.policy_bench.experiments import BatchRow, LandscapeResult  # noqa: E402
from kernelband.policy_bench.runner import regret_curves  # noqa: E402


def plot_curves(results: list[LandscapeResult], path: Path, per_row: int = 4) -> None:
    """Mean best speedup above simple regret per pull, `per_row` landscapes side by side."""
    ncols = min(per_row, len(results))
    groups = -(-len(results) // ncols)
    fig, axes = plt.subplots(2 * groups, ncols, figsize=(5 * ncols, 4 * 2 * groups),
                             squeeze=False)
    for index, result in enumerate(results):
        top, bottom = axes[2 * (index // ncols)][index % ncols], axes[2 * (index // ncols) + 1][index % ncols]
        regrets = regret_curves(result.curves)
        for label, curves in result.curves.items():
            style = "--" if label.startswith("ablation") else "-"
            top.plot(curves.mean(axis=0), style, label=label)
            bottom.plot(regrets[label], style, label=label)
        top.set_title(f"{result.name} (SIMULATED)")
        top.set_ylabel("mean best speedup")
        bottom.set_ylabel("simple regret (log, vs best-known)")
        bottom.set_xlabel("pulls")
    for index in range(len(results), groups * ncols):  # empty cells of the last row
        axes[2 * (index // ncols)][index % ncols].axis("off")
        axes[2 * (index // ncols) + 1][index % ncols].axis("off")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Policy benchmark on simulated reward landscapes (not measurements)")
    fig.tight_layout(rect=(0.0, 0.0, 1.0, 0.98))  # keep the title clear of the first row
    fig.savefig(path, dpi=110)
    plt.close(fig)


def landscape_table(results: list[LandscapeResult], budgets: tuple[int, ...]) -> str:
    """Markdown: mean best speedup ± 95% CI and Fast@1 per variant, landscape and budget."""
    head = "| landscape | policy | " + " | ".join(
        f"T={t} speedup | T={t} Fast@1" for t in budgets) + " |"
    lines = [head, "|" + " --- |" * (2 + 2 * len(budgets))]
    for result in results:
        for label in result.curves:
            cells = []
            for t in budgets:
                if t < result.curves[label].shape[1]:
                    s = result.at(label, t)
                    cells += [s.text(), f"{100 * s.fast1:.0f}%"]
                else:
                    cells += ["-", "-"]
            lines.append(f"| {result.name} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def verdicts(result: LandscapeResult, budget: int, rivals: tuple[str, ...]) -> list[str]:
    """Does `kernelband` beat each rival at `budget` with non-overlapping 95% CIs?"""
    ours = result.at("kernelband", budget)
    out = []
    for rival in rivals:
        other = result.at(rival, budget)
        if ours.low > other.high:
            word = "beats"
        elif ours.high < other.low:
            word = "LOSES to"
        else:
            word = "does not separate from (overlapping CIs)"
        out.append(f"- {result.name}, T={budget}: kernelband {ours.text()} {word} {rival} "
                   f"{other.text()}")
    return out


def batch_table(rows: list[BatchRow]) -> str:
    lines = ["| policy | P in flight | with pending scheme | ignoring pending | paired gain | seeds where scheme won |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r.policy} | {r.pending} | {r.virtual.text()} | {r.ignore.text()} | "
                     f"{r.gain.mean:+.3f} ± {r.gain.ci95:.3f} | {100 * r.gain.fast1:.0f}% |")
    return "\n".join(lines)
