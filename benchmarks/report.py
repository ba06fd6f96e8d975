"""Metrics, targets and the three outputs: results.json, results.md (a table) and results.png (a chart)."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
TIMES = "\u00d7"  # the multiplication sign, as in "0.3x Powertools"
DASH = "\u2013"  # an empty cell


@dataclass
class Target:
    """The bar we hold ourselves to: either on the ratio ours / reference, or on ours itself."""

    on: str  # "ratio" or "value"
    limit: float
    text: str  # as the README says it, e.g. "<= 0.3x Powertools"
    at_least: bool = False  # the limit is a floor (throughput), not a ceiling

    def met(self, ours: float | None, ratio: float | None) -> bool | None:
        measured = ratio if self.on == "ratio" else ours
        if measured is None:
            return None
        if self.at_least:
            return measured >= self.limit - 1e-12
        return measured <= self.limit + 1e-12


@dataclass
class Metric:
    name: str
    unit: str
    ours: float | None
    reference: float | None
    reference_name: str
    method: str
    target: Target | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.ours is None or self.reference is None or self.reference == 0:
            return None
        return self.ours / self.reference

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.target.met(self.ours, self.ratio)

    def as_json(self) -> dict[str, Any]:
        ratio = self.ratio
        out: dict[str, Any] = {
            "name": self.name,
            "unit": self.unit,
            "ours": _rounded(self.ours),
            "reference": _rounded(self.reference),
            "reference_name": self.reference_name,
            "ratio": None if ratio is None else round(ratio, 4),
            "method": self.method,
            "target": None if self.target is None else self.target.text,
            "met": self.met,
        }
        out.update(self.extra)
        return out


def _rounded(value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, int) or float(value).is_integer():
        return value
    return float(f"{value:.6g}")


def in_repo(command: Sequence[str], **options: Any) -> subprocess.CompletedProcess[str]:
    """``command`` run from the repository's root, output captured as text (``check`` off unless given)."""
    return subprocess.run(
        command, **{"cwd": REPO_ROOT, "capture_output": True, "text": True, "check": False, **options}
    )


def git_commit() -> str:
    """The commit measured, "+uncommitted" when tracked files differ from it."""
    try:
        commit = in_repo(["git", "rev-parse", "--short", "HEAD"], check=True).stdout.strip()
        dirty = in_repo(["git", "status", "--porcelain", "--untracked-files=no"], check=True).stdout.strip()
        return commit + ("+uncommitted" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def paired_ratio(ours: Sequence[float], reference: Sequence[float]) -> float:
    """Median of per-round ratios, to 4 places: each pair ran seconds apart, so slow drift cancels."""
    return round(statistics.median(o / r for o, r in zip(ours, reference, strict=True)), 4)


def side_by_side(ours: float, reference: float) -> dict[str, float]:
    return {"ours": round(ours, 4), "reference": round(reference, 4), "ratio": round(ours / reference, 4)}


def recorded(
    name: str,
    unit: str,
    ours: float | None,
    method: str,
    target: Target | None = None,
    extra: dict[str, Any] | None = None,
) -> Metric:
    """A metric with no reference: recorded, or held to a target on its own value."""
    return Metric(name, unit, ours, None, "", method, target, extra or {})


def unmeasured(
    name: str, unit: str, reference_name: str, method: str, reason: str, target: Target | None = None
) -> Metric:
    """A metric that could not be taken in this run; it stays in the table, empty, with the reason."""
    return Metric(name, unit, None, None, reference_name, method, target, {"not_measured": reason})


def write_json(metrics: list[Metric], run_info: dict[str, Any], path: Path) -> dict[str, Any]:
    document = {"metrics": [metric.as_json() for metric in metrics], "run": run_info}
    path.write_text(json.dumps(document, indent=2) + "\n")
    return document


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return DASH
    if unit == "bytes":
        return f"{value:,.0f}"
    if value == 0:
        return "0"
    if float(value).is_integer() and abs(value) < 1e6:
        return f"{value:.0f}"
    digits = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{digits}f}"


def _met_cell(metric: Metric) -> str:
    if metric.target is None:
        return "(recorded)"
    if metric.met is None:
        return "not measured"
    return "yes" if metric.met else "**no**"


def render_markdown(metrics: list[Metric], run_info: dict[str, Any]) -> str:
    lines = [
        "# Benchmark results",
        "",
        f"Run {run_info.get('finished_utc', '?')} on {run_info.get('machine', '?')}, commit "
        f"`{run_info.get('commit', '?')}`, {run_info.get('duration_s', '?')} s "
        f"(1-minute load average {run_info.get('load_average_start', '?')} at start, "
        f"{run_info.get('load_average_end', '?')} at end). "
        "Ratios are ours / reference, measured side by side in this run; rerun with `make bench`.",
        "",
        "| metric | unit | ours | reference | ratio | target | met |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for metric in metrics:
        reference = fmt(metric.reference, metric.unit)
        if metric.reference_name:
            reference += f" ({metric.reference_name})"
        ratio = DASH if metric.ratio is None else f"{metric.ratio:.2f}{TIMES}"
        target = DASH if metric.target is None else metric.target.text
        lines.append(
            f"| `{metric.name}` | {metric.unit} | {fmt(metric.ours, metric.unit)} | {reference} | {ratio} "
            f"| {target} | {_met_cell(metric)} |"
        )
    lines += ["", "![ours / reference per metric, and batch latency by message groups](results.png)"]
    lines += ["", "## Method", ""]
    for metric in metrics:
        note = metric.extra.get("not_measured")
        suffix = f" **Not measured in this run:** {note}" if note else ""
        if metric.extra.get("carried_over"):
            suffix += f" **{metric.extra['carried_over']}** (`--skip-test-suite`)."
        lines.append(f"- `{metric.name}`: {metric.method}{suffix}")
    return "\n".join(lines) + "\n"


def render_chart(metrics: list[Metric], latency: dict[str, dict[int, float]] | None, path: Path) -> None:
    """Left: ours / reference per metric with its target. Right: batch latency by message groups."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    compared = [m for m in metrics if m.ratio is not None and m.reference_name]
    panels = 2 if latency else 1
    fig, axes = plt.subplots(
        1, panels, figsize=(7 * panels, 0.42 * max(len(compared), 6) + 1.6), squeeze=False
    )
    ax = axes[0][0]
    names = [m.name for m in compared][::-1]
    ratios = [m.ratio for m in compared][::-1]
    colors = ["#9e9e9e" if m.met is None else ("#2e7d32" if m.met else "#c62828") for m in compared[::-1]]
    ax.barh(names, ratios, color=colors)
    for i, m in enumerate(compared[::-1]):
        if m.target is not None and m.target.on == "ratio":
            ax.plot([m.target.limit] * 2, [i - 0.4, i + 0.4], color="black", linewidth=2)
        ax.text(m.ratio, i, f" {m.ratio:.2f}{TIMES}", va="center", fontsize=8)
    ax.axvline(1.0, color="#555555", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("ours / reference (log scale; black tick = target; green met, red missed)")
    ax.set_title("Side by side with Powertools, the boto3 floor and plain CDK")
    ax.tick_params(axis="y", labelsize=8)
    if latency:
        ax2 = axes[0][1]
        contenders = list(latency)
        group_counts = sorted({g for per in latency.values() for g in per})
        width = 0.8 / len(contenders)
        for j, name in enumerate(contenders):
            xs = [i + j * width for i in range(len(group_counts))]
            ax2.bar(xs, [latency[name].get(g, 0) * 1000 for g in group_counts], width=width, label=name)
        ax2.set_xticks([i + width * (len(contenders) - 1) / 2 for i in range(len(group_counts))])
        ax2.set_xticklabels([f"{g} group{'s' if g > 1 else ''}" for g in group_counts])
        ax2.set_ylabel("median wall time of a 10-record batch (ms)")
        ax2.set_title("Batch latency, fixed latency injected per DynamoDB request")
        ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render_cost_chart(costs: list[Any], path: Path) -> None:
    """USD per million messages, one stacked bar per contender, by component."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    components = list(costs[0].components)
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(costs) + 1.8))
    names = [cost.name for cost in costs][::-1]
    left = [0.0] * len(costs)
    for component in components:
        values = [cost.components[component] for cost in costs][::-1]
        ax.barh(names, values, left=left, label=component)
        left = [a + b for a, b in zip(left, values, strict=True)]
    for i, total in enumerate(left):
        ax.text(total, i, f" ${total:.2f}", va="center", fontsize=8)
    ax.set_xlabel("USD per million messages (us-east-1 on-demand prices; see results.md for the method)")
    ax.set_title("What a million messages cost, by component")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
