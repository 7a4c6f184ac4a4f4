"""Smoke results as plots (PNG): latency on a percentile axis, p99, p99.9 and max labelled, the
target drawn; one run's samples, result documents, or a fleet's merged histogram.

matplotlib is optional (the ``plots`` extra): it is imported only when a plot is drawn, and
:func:`require_matplotlib` says it is missing before anything runs.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field

from hostkit.errors import BadInput
from hostkit.smoke.metrics import histogram_percentile, percentile
from hostkit.smoke.output_files import write_atomic


def require_matplotlib(option: str = "--plot") -> None:
    """Plots need matplotlib: say so, naming the option, before anything runs."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise BadInput(
            f"{option} needs matplotlib, which is not installed: pip install 'hostkit-tuning[plots]' "
            f"(the plots extra), or leave out {option}"
        ) from None


# A percentile axis (HdrHistogram's): x = 1/(1-p) on a log scale, so 90%, 99%, 99.9%, 99.99% are
# a decade apart each and the tail gets as much room as the body; y = latency, log.

FLOOR_MS = 1e-4  # a deschedule of 0 drawn at 0.1 us (log axis)
PERCENTILE_TICKS = (
    (50, "50%"),
    (90, "90%"),
    (99, "99%"),
    (99.9, "99.9%"),
    (99.99, "99.99%"),
    (99.999, "99.999%"),
    (99.9999, "99.9999%"),
)
MARKS = (("p99", 99.0), ("p99.9", 99.9), ("max", 100.0))
FIGSIZE, DPI = (9.0, 5.5), 110  # one panel: 990 x 605 pixels


def _px(p: float) -> float:
    return 1.0 / (1.0 - p / 100.0)


@dataclass
class Curve:
    """One latency distribution on the percentile axis: points (x = 1/(1-p), ms) and the marks
    (name -> (x, ms)) to label."""

    label: str
    points: list[tuple[float, float]]
    marks: dict[str, tuple[float, float]] = field(default_factory=dict)
    n: int = 0
    labelled: bool = True  # label its marks (a fleet plot labels only the fleet's)
    tail_gap: bool = False  # nothing known between the last two points (drawn dotted)
    style: dict = field(default_factory=dict)


def _marks(n: int, p99: float | None, p999: float | None, top: float | None) -> dict[str, tuple[float, float]]:
    """Where p99, p99.9 and max sit; marks on the same point share one label ("p99.9 = max": with
    n <= 1,000 samples the nearest-rank p99.9 is the largest sample)."""
    out: dict[str, tuple[float, float]] = {}
    for (name, p), v in zip(MARKS, (p99, p999, top)):
        if v is None or not n:
            continue
        rank = max(0, min(n - 1, math.ceil(p / 100.0 * n) - 1))  # nearest rank, as metrics.percentile
        at = (n / (n - rank), max(v, FLOOR_MS))  # where the curves put that sample
        same = [k for k, xy in out.items() if xy == at]
        if same:
            del out[same[0]]
            name = f"{same[0]} = {name}"
        out[name] = at
    return out


def curve_from_values(label: str, values_ms: list[float]) -> Curve:
    """All samples of a run (the i-th smallest of n at x = n/(n-i)), thinned to ~2,000 points
    spread evenly over log x, the last 1,000 samples kept whole."""
    v = sorted(values_ms)
    n = len(v)
    if not n:
        return Curve(label, [], {}, 0)
    keep = set(range(max(0, n - 1000), n))
    steps = 2000
    for k in range(steps + 1):
        x = n ** (k / steps)
        keep.add(min(n - 1, max(0, n - math.ceil(n / x))))
    pts = [(n / (n - i), max(v[i], FLOOR_MS)) for i in sorted(keep)]
    return Curve(label, pts, _marks(n, percentile(v, 99), percentile(v, 99.9), v[-1]), n)


def curve_from_result(label: str, r: dict) -> Curve:
    """From a result document alone: its deschedule at every 0.1% and its maximum."""
    cdf, n = r.get("deschedule_cdf_ms") or [], r["samples"]
    if not cdf or not n:
        return Curve(label, [], {}, 0)
    # cdf[k] is the sample of rank (k * n) // 1000 (session.aggregate), the last one the largest.
    pts = [(n / (n - (k * n) // 1000), max(y, FLOOR_MS)) for k, y in enumerate(cdf[:-1])]
    pts.append((n, max(cdf[-1], FLOOR_MS)))
    d = r["deschedule_ms"]
    return Curve(label, pts, _marks(n, d["p99"], d["p999"], d["max"]), n, tail_gap=n > 1000)


def curve_from_histogram(label: str, hist: dict, max_ms: float | None) -> Curve:
    """Bucket upper bounds as steps: for every percentile p in a bucket, the latency is at most
    its bound (never above ``max_ms``, the largest sample)."""
    n = hist["count"]
    if not n:
        return Curve(label, [], {}, 0)
    cap = math.inf if max_ms is None else max_ms
    pts, seen = [], 0
    for le, c in zip(list(hist["le_s"]) + [math.inf], hist["counts"]):
        if not c:
            continue
        y = max(min(le * 1000.0, cap), FLOOR_MS)
        x0 = n / (n - seen)
        seen += c
        pts += [(x0, y), (n / (n - seen) if seen < n else n, y)]
    bound = {name: histogram_percentile(hist, p) for name, p in MARKS[:2]}
    p99, p999 = (None if bound[k] is None else min(bound[k] * 1000.0, cap) for k in ("p99", "p99.9"))
    return Curve(label, pts, _marks(n, p99, p999, max_ms), n)


def _fmt_ms(v: float) -> str:
    if v >= 1000:
        return f"{v / 1000:.3g} s"
    return f"{v:.3g} ms" if v >= 0.01 else f"{v * 1000:.3g} µs"


def _draw_panel(fig, ax, title: str, curves: list[Curve], target_ms: float | None, ylabel: str):
    from matplotlib.ticker import NullLocator

    ax.set_xscale("log")
    ax.set_yscale("log")
    anns = []
    xmax, ys = 1e4, []
    labelled = [c for c in curves if c.labelled and c.marks]
    for c in curves:
        if not c.points:
            continue
        solid = c.points[:-1] if c.tail_gap else c.points
        (line,) = ax.plot([p[0] for p in solid], [p[1] for p in solid], label=c.label, **{"linewidth": 1.4, **c.style})
        if c.tail_gap:  # the document holds every 0.1% and the max, nothing in between
            ax.plot(
                [p[0] for p in c.points[-2:]],
                [p[1] for p in c.points[-2:]],
                linestyle=":",
                color=line.get_color(),
                linewidth=line.get_linewidth(),
            )
        xmax, ys = max(xmax, c.n), ys + [p[1] for p in c.points]
        if not (c.labelled and c.marks):
            continue
        prefix = f"{c.label.split(' (')[0]} " if len(labelled) > 1 else ""
        for name, (x, y) in c.marks.items():
            ax.plot([x], [y], marker="o" if name != "max" else "^", color=line.get_color(), markersize=5)
            ann = ax.annotate(
                f"{prefix}{name} {_fmt_ms(y)}",
                (x, y),
                xytext=(-8, 10),
                textcoords="offset points",
                ha="right",
                va="bottom",
                fontsize=8,
                color=line.get_color(),
                bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": line.get_color(), "lw": 0.6},
                arrowprops={"arrowstyle": "-", "color": line.get_color(), "lw": 0.6},
                annotation_clip=False,
            )
            ann.set_gid(f"hostkit-mark:{name}")
            anns.append(ann)
    obstacles = []
    if target_ms:
        ys.append(target_ms)
        ax.axhline(target_ms, color="red", linewidth=1, linestyle="--")
        obstacles.append(
            ax.annotate(
                f"target p99.9 {_fmt_ms(target_ms)}",
                (0.01, target_ms),
                xycoords=("axes fraction", "data"),
                xytext=(0, 2),
                textcoords="offset points",
                color="red",
                fontsize=8,
                va="bottom",
            )
        )
    ticks = [(_px(p), t) for p, t in PERCENTILE_TICKS if _px(p) <= xmax * 1.01]
    ax.set_xticks([1.0] + [t[0] for t in ticks])
    ax.set_xticklabels(["0%"] + [t[1] for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(1.0, xmax * 2.0)
    lo, hi = (min(ys), max(ys)) if ys else (FLOOR_MS, 1.0)
    ax.set_ylim(lo / 2.0, hi * 3.0)
    ax.grid(True, which="major", alpha=0.3)
    ax.set_xlabel("percentile (log of 1/(1-p): each tick a decade further into the tail)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if any(c.points for c in curves):
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=min(3, len(curves)), fontsize=8, frameon=False)
    return anns, obstacles


def _text_box(t, renderer):
    """The box of a label's text alone (an annotation's own extent includes its leader line)."""
    from matplotlib.text import Annotation, Text

    if isinstance(t, Annotation):
        t.update_positions(renderer)
    return Text.get_window_extent(t, renderer)


def _place_labels(fig, ax, anns: list, obstacles: list, pad_px: float = 6.0) -> None:
    """Spread the mark labels so that no two overlap, nor the target's label: lowest mark first,
    each label moved up past whatever it would cover; flipped to the right of its mark where it
    would leave the axes on the left; the y axis raised (and everything placed again) while a
    label sticks out at the top."""
    renderer = fig.canvas.get_renderer()
    for _ in range(8):
        for ann in anns:
            ann.set_ha("right")
            ann.xyann = (-8, 10)
        frame = ax.get_window_extent(renderer)
        placed = [_text_box(o, renderer) for o in obstacles]
        order = sorted(anns, key=lambda a: (ax.transData.transform(a.xy)[1], ax.transData.transform(a.xy)[0]))
        for ann in order:
            if _text_box(ann, renderer).x0 < frame.x0:
                ann.set_ha("left")
                ann.xyann = (8, 10)
            for _ in range(len(placed) + 1):
                box = _text_box(ann, renderer)
                hit = [
                    p
                    for p in placed
                    if box.x0 < p.x1 + pad_px
                    and p.x0 < box.x1 + pad_px
                    and box.y0 < p.y1 + pad_px
                    and p.y0 < box.y1 + pad_px
                ]
                if not hit:
                    break
                up = max(p.y1 for p in hit) + pad_px - box.y0
                ann.xyann = (ann.xyann[0], ann.xyann[1] + up * 72.0 / fig.dpi)
            placed.append(_text_box(ann, renderer))
        top = max((b.y1 for b in placed), default=frame.y1)
        if top <= frame.y1:
            return
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi * 10 ** max(0.5, math.log10(hi / lo) * (top - frame.y1) / frame.height * 1.2))


def percentile_figure(
    panels: list[tuple[str, list[Curve], float | None]], ylabel: str = "deschedule per inference (ms, log)"
):
    """One panel per (title, curves, target ms); p99, p99.9 and max of each labelled curve marked
    and labelled without overlap. Returns the matplotlib Figure (Agg)."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(FIGSIZE[0] * len(panels), FIGSIZE[1]), dpi=DPI)
    FigureCanvasAgg(fig)  # no pyplot: no global state, no display needed
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    fig.subplots_adjust(left=0.08 / len(panels), right=1 - 0.02 / len(panels), top=0.92, bottom=0.2, wspace=0.15)
    drawn = [
        (ax, *_draw_panel(fig, ax, title, curves, target, ylabel)) for ax, (title, curves, target) in zip(axes, panels)
    ]
    for ax, anns, obstacles in drawn:
        _place_labels(fig, ax, anns, obstacles)
    return fig


def save_figure(fig, path: str) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    write_atomic(path, buf.getvalue())


def plot(results: list[tuple[str, dict, list[float]]], path: str, target_ms: float | None = None):
    """``hostkit smoke --plot``: the deschedule of each run on a percentile axis (all samples),
    p99, p99.9 and max labelled, the target drawn. Returns the Figure written."""
    curves = [curve_from_values(label, values) for label, _, values in results]
    fig = percentile_figure([("hostkit smoke: deschedule per inference", curves, target_ms)])
    save_figure(fig, path)
    return fig


def plot_results(
    results: list[tuple[str, dict]],
    path: str,
    target_ms: float | None = None,
    title: str = "hostkit smoke: deschedule per inference",
):
    """Result documents (``hostkit smoke --json``, or a host's in a fleet run) on a percentile axis,
    from each one's deschedule at every 0.1% and its maximum. Returns the Figure written."""
    fig = percentile_figure([(title, [curve_from_result(label, r) for label, r in results], target_ms)])
    save_figure(fig, path)
    return fig


def plot_fleet(docs: dict[str, dict], summary: dict, path: str, target_ms: float | None = None):
    """``hostkit smoke -i --plot``: every host's curve (from its document) and the fleet's, from
    the merged histogram (bucket upper bounds); the fleet's p99, p99.9 and max labelled."""
    curves = [
        Curve(**{**vars(curve_from_result(h, docs[h])), "labelled": False, "style": {"linewidth": 0.8, "alpha": 0.6}})
        for h in summary["hosts"]
    ]
    if summary["hosts"]:
        top = summary["max_s"]["deschedule"]
        curves.append(
            Curve(
                **{
                    **vars(
                        curve_from_histogram(
                            f"fleet ({len(summary['hosts'])} hosts, merged buckets: at most)",
                            summary["histograms"]["deschedule"],
                            None if top is None else top * 1000.0,
                        )
                    ),
                    "style": {"color": "black", "linewidth": 2.0},
                }
            )
        )
    fig = percentile_figure([("hostkit smoke -i: deschedule per inference, fleet", curves, target_ms)])
    save_figure(fig, path)
    return fig
