"""Pictures of plans: timelines, core-grid heatmaps and memory over time.

`planc plot FILE -o out.png` draws what fits the document:

* ARK plans: a timeline of processors over the cost model's time, coloured by task group (the
  operators it runs), and the device bytes of the buffers live in each processor group;
* Gemini schedules: a timeline of every core's workloads (their `time` in cycles, one after the
  other, DRAM waits not shown) and each core's L2 occupancy workload by workload;
* Tenstorrent plans: one heatmap per kernel of the work (output tiles x K tiles) per core.

`planc simulate --trace t.json` writes the same timelines as a Chrome trace (the JSON Trace
Event format, opened by ui.perfetto.dev or chrome://tracing). The timelines come from the
same cost models as `planc simulate`'s figures, so picture and numbers agree.

matplotlib is an optional extra (`pip install planc[plot]`); the traces need nothing.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from ground.diagnostics import PlancError

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp


@dataclass
class Timeline:
    """Bars on rows (processors, cores) over time."""

    title: str
    row_label: str
    unit: str
    """'us' or 'cycles'."""
    rows: list[int] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)

    def add(self, row: int, start: float, duration: float, label: str) -> None:
        self.rows.append(row)
        self.starts.append(start)
        self.durations.append(duration)
        self.labels.append(label)


@dataclass
class Occupancy:
    """Bytes in use over time, per series (a core, or the whole device)."""

    title: str
    unit: str
    series: dict[str, tuple[list[float], list[int]]] = field(default_factory=dict)
    capacity: int | None = None


@dataclass
class Heatmap:
    title: str
    values: np.ndarray
    """values[y, x]: the work of core (x, y)."""
    label: str


Picture = Timeline | Occupancy | Heatmap


# ---------------------------------------------------------------------------------------------
# What each format shows
# ---------------------------------------------------------------------------------------------


def pictures(module: ModuleOp, options: Any = None) -> list[Picture]:
    """Every picture that fits the document in `module`."""
    from compiler.api import document_format

    fmt = document_format(module).name
    if fmt == "ark-plan":
        return ark_plan_pictures(module, getattr(options, "arch", None))
    if fmt == "gemini-ir":
        return gemini_pictures(module)
    if fmt == "tt":
        return tt_pictures(module)
    raise PlancError(f"pictures and traces are drawn for ARK plans, Gemini schedules and TT "
                     f"plans, not {fmt} documents")


def ark_plan_pictures(module: ModuleOp, arch: str | None = None) -> list[Picture]:
    from dialects import ark
    from targets.ark.cost_model import plan_cost
    from targets.ark.plan_simulator import plan_device, single

    p = single(module)
    device, _ = plan_device(p, arch)
    cost = plan_cost(p, device)
    names = {task: "+".join(op.label.data for op in ops)
             for task, ops in p.task_operators().items()}
    timeline = Timeline(f"ARK plan on {device.name}: {cost.modeled_time_s * 1e6:.1f} us modeled",
                        "processor", "us")
    pg_span: dict[int, list[float]] = {}
    for span in cost.spans:
        for proc, start, seconds in zip(span.processors, span.start_s, span.seconds,
                                        strict=True):
            timeline.add(int(proc), start * 1e6, seconds * 1e6, names.get(span.task, "?"))
        window = pg_span.setdefault(span.processor_group, [np.inf, 0.0])
        window[0] = min(window[0], float(span.start_s.min()) * 1e6)
        window[1] = max(window[1], float((span.start_s + span.seconds).max()) * 1e6)
    # Buffers live from the first to the last processor group whose operators touch them.
    from dialects.plan import buffer_layout

    layout = buffer_layout(p)
    live: dict[int, list[int]] = {}
    task_group_of = {span.task: span.processor_group for span in cost.spans}
    for task, ops in p.task_operators().items():
        group = task_group_of.get(task)
        if group is None:
            continue
        for op in ops:
            for value in [*op.operands, *op.results]:
                if isinstance(value.type, ark.TensorType) and value.type.buffer_id in layout.sizes:
                    first_last = live.setdefault(value.type.buffer_id, [group, group])
                    first_last[0], first_last[1] = min(first_last[0], group), max(first_last[1],
                                                                                   group)
    times, used = [], []
    for group in sorted(pg_span):
        nbytes = sum(layout.sizes[b] for b, (lo, hi) in live.items() if lo <= group <= hi)
        times += pg_span[group]
        used += [nbytes, nbytes]
    memory = Occupancy(f"bytes of the buffers between their first and last use "
                       f"({layout.total_bytes / 1e6:.1f} MB allocated in all)", "us",
                       {"device": (times, used)})
    return [timeline, memory]


def gemini_pictures(module: ModuleOp) -> list[Picture]:
    from dialects import gemini

    schedule = next(op for op in module.ops if isinstance(op, gemini.ScheduleOp))
    timeline = Timeline("Gemini workloads per core (compute cycles; DRAM waits not shown)",
                        "core", "cycles")
    occupancy = Occupancy("L2 occupancy per core", "cycles",
                          capacity=schedule.buffersize.value.data)
    for core in schedule.cores:
        clock, times, used = 0.0, [], []
        for wl in core.workloads:
            cycles = float(wl.value("time") or 0)
            label = str(wl.value("layer_name") or "workload")
            timeline.add(core.id, clock, cycles, label)
            nbytes = sum(int(t.value("size") or 0) for t in wl.buffer)
            times += [clock, clock + cycles]
            used += [nbytes, nbytes]
            clock += cycles
        occupancy.series[f"core {core.id}"] = (times, used)
    return [timeline, occupancy]


MAX_HEATMAP_CORES = 1 << 20
"""The most cells of a core map (a picture has far fewer pixels)."""


def tt_pictures(module: ModuleOp) -> list[Picture]:
    from dialects import tt

    maps: list[Picture] = []
    for plan in (op for op in module.walk() if isinstance(op, tt.PlanOp)):
        partition = plan.work_partition
        grid = plan.grid
        if partition is None or grid is None:
            continue
        if grid[0] * grid[1] > MAX_HEATMAP_CORES:
            raise PlancError(f"a {grid[0]}x{grid[1]} core grid is more than the "
                             f"{MAX_HEATMAP_CORES} cores planc draws (2^31 x 2^31 was an "
                             "allocation error)", path="$.core_grid")
        values = np.zeros((grid[1], grid[0]))
        for core in partition.cores():
            xy = core.coordinates
            if xy is None or not (0 <= xy[0] < grid[0] and 0 <= xy[1] < grid[1]):
                continue
            values[xy[1], xy[0]] = sum(max(item.len_k_value or 1, 1) for item in core.items())
        maps.append(Heatmap(f"{plan.label()}: work per core on a {grid[0]}x{grid[1]} grid",
                            values, "output tiles x K tiles"))
    return maps


# ---------------------------------------------------------------------------------------------
# Drawing
# ---------------------------------------------------------------------------------------------


def draw(pictures_: list[Picture], path: str | BinaryIO, image_format: str = "png") -> None:
    """Draw `pictures_` into `path` (a file name or a binary stream), as PNG, SVG or PDF."""
    try:
        import matplotlib
    except ImportError:
        raise PlancError("planc plot needs matplotlib: pip install 'planc[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not pictures_:
        raise PlancError("nothing to draw: the document has no schedule or work partition")
    # Heatmaps side by side, three to a row; timelines and curves across the whole width.
    columns = 3 if all(isinstance(p, Heatmap) for p in pictures_) and len(pictures_) > 1 else 1
    rows = -(-len(pictures_) // columns)
    width, height = (11, 3.6) if columns == 1 else (5 * columns, 4)
    figure, axes = plt.subplots(rows, columns, figsize=(width, height * rows), squeeze=False)
    for picture, ax in zip(pictures_, axes.flat, strict=False):
        DRAWERS[type(picture)](picture, ax)
    for ax in list(axes.flat)[len(pictures_):]:
        ax.axis("off")
    if image_format not in ("png", "svg", "pdf"):
        raise PlancError(f"planc plot writes .png, .svg or .pdf images, not .{image_format}")
    with warnings.catch_warnings():
        # Names from the input may hold characters the font lacks (CJK, NUL): matplotlib
        # draws a box and warned once per glyph on stderr, after a successful run.
        warnings.filterwarnings("ignore", message="Glyph .* missing from", category=UserWarning)
        figure.tight_layout()
        figure.savefig(path, dpi=110, format=image_format)
    plt.close(figure)


def _draw_timeline(t: Timeline, ax) -> None:
    import matplotlib.pyplot as plt

    kinds = list(dict.fromkeys(t.labels))
    colours = plt.get_cmap("tab20")
    colour_of = {label: colours(i % 20) for i, label in enumerate(kinds)}
    ax.barh(t.rows, t.durations, left=t.starts, height=0.9,
            color=[colour_of[label] for label in t.labels], linewidth=0)
    ax.set_xlabel(f"time ({t.unit})")
    ax.set_ylabel(t.row_label)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_title(t.title)
    ax.invert_yaxis()
    shown = kinds[:12]
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour_of[k]) for k in shown]
    ax.legend(handles, [k[:40] for k in shown], fontsize=7, loc="upper right",
              title=f"{len(kinds)} kinds" if len(kinds) > len(shown) else None)


def _draw_occupancy(o: Occupancy, ax) -> None:
    for name, (times, used) in o.series.items():
        ax.plot(times, np.asarray(used) / 1e6, label=name, linewidth=1)
    if o.capacity:
        ax.axhline(o.capacity / 1e6, color="red", linestyle="--", label="capacity")
    ax.set_xlabel(f"time ({o.unit})")
    ax.set_ylabel("MB")
    ax.set_title(o.title)
    if len(o.series) <= 16:
        ax.legend(fontsize=7, loc="upper right")


def _draw_heatmap(h: Heatmap, ax) -> None:
    # From zero, so a balanced partition reads as one colour and an idle core as dark.
    image = ax.imshow(h.values, cmap="viridis", origin="upper", vmin=0)
    ax.set_xticks(range(h.values.shape[1]))
    ax.set_yticks(range(h.values.shape[0]))
    if h.values.size <= 64:
        for (y, x), value in np.ndenumerate(h.values):
            ax.text(x, y, f"{value:g}", ha="center", va="center", fontsize=7, color="white")
    ax.set_xlabel("core x")
    ax.set_ylabel("core y")
    ax.set_title(h.title)
    ax.figure.colorbar(image, ax=ax, label=h.label)


DRAWERS = {Timeline: _draw_timeline, Occupancy: _draw_occupancy, Heatmap: _draw_heatmap}


# ---------------------------------------------------------------------------------------------
# Chrome traces
# ---------------------------------------------------------------------------------------------


def chrome_trace(pictures_: list[Picture]) -> str:
    """The timelines of `pictures_` as Trace Event JSON (`ts`/`dur` in microseconds; cycle
    timelines are written one cycle per microsecond, and say so in their process name)."""
    events: list[dict[str, Any]] = []
    for pid, t in enumerate(p for p in pictures_ if isinstance(p, Timeline)):
        events.append({"name": "process_name", "ph": "M", "pid": pid,
                       "args": {"name": f"{t.title} [{t.unit}]"}})
        for row in sorted(set(t.rows)):
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": row,
                           "args": {"name": f"{t.row_label} {row}"}})
        for row, start, duration, label in zip(t.rows, t.starts, t.durations, t.labels,
                                               strict=True):
            events.append({"name": label, "ph": "X", "pid": pid, "tid": row, "ts": start,
                           "dur": duration})
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ns"})
