"""Pictures of plans: timelines, core-grid heatmaps and memory over time.

`planc plot FILE -o out.png` draws what fits the document:

* ARK plans: a timeline of processors over the cost model's time, coloured by task group (the
  operators it runs), and the device bytes of the buffers live at each moment of that
  schedule (a buffer from the first start to the last end of the task groups touching it);
* Gemini schedules: a timeline of every core's workloads (their `time` in cycles, converted to
  microseconds at Gemini's clock, one after the other, DRAM waits not shown) and each core's
  L2 occupancy workload by workload;
* Tenstorrent plans: the kernels over the cost model's time with where their operands live,
  and one heatmap per kernel of the work per core (what a unit of work is depends on the
  kernel's kind);
* MSCCL++ plans: every thread block of every rank over the alpha-beta model's time, after the
  kernel launch that the modeled time counts.

Every time axis is in microseconds; memory is a step function; legends name the kinds that
take the most time and group the rest as "others".

`planc simulate --trace t.json` writes the same timelines as a Chrome trace (the JSON Trace
Event format, opened by ui.perfetto.dev or chrome://tracing), with each span's `args` and the
memory curves as counter tracks. The timelines come from the same cost models as `planc
simulate`'s figures, so picture and numbers agree.

matplotlib is an optional extra (`pip install planc[plot]`); the traces need nothing.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from ground.diagnostics import PlancError

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp


@dataclass
class Timeline:
    """Bars on rows (processors, cores, kernels) over time, in microseconds."""

    title: str
    row_label: str
    unit: str = "us"
    """The time axis' unit; every timeline is in microseconds (cycle counts are converted at a
    clock the title states), so pictures and traces of every format read alike."""
    row_names: dict[int, str] = field(default_factory=dict)
    """A row's tick label where its number alone would not say what it is."""
    links: list[tuple[int, float, int]] = field(default_factory=list)
    """Transfers drawn as lines: (from row, at time, to row)."""
    rows: list[int] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    args: list[dict[str, Any]] = field(default_factory=list)
    """Per bar: what a trace viewer shows when it is selected (op, tensors, bytes)."""
    kinds: str = "kinds"
    """What the bar labels, which the legend colours, are (`69 layers, by time`)."""

    def add(self, row: int, start: float, duration: float, label: str,
            args: dict[str, Any] | None = None) -> None:
        self.rows.append(row)
        self.starts.append(start)
        self.durations.append(duration)
        self.labels.append(label)
        self.args.append(args or {})


@dataclass
class Occupancy:
    """Bytes in use over time, per series (a core, or the whole device): a step function,
    `used[i]` bytes from `times[i]` until the next time (the last value holds to the end)."""

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
    """What a value counts (the colour bar's label)."""


def step_series(intervals: list[tuple[float, float, int]]) -> tuple[list[float], list[int]]:
    """The bytes in use over time of `intervals` ((start, end, bytes) each), as the steps of
    an `Occupancy` series: one point per distinct time, in time order."""
    deltas: dict[float, int] = {}
    for start, end, nbytes in intervals:
        deltas[start] = deltas.get(start, 0) + nbytes
        deltas[end] = deltas.get(end, 0) - nbytes
    times, used, total = [], [], 0
    for time in sorted(deltas):
        total += deltas[time]
        times.append(time)
        used.append(total)
    return times, used


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
        return tt_pictures(module, getattr(options, "arch", None))
    if fmt == "mscclpp":
        return mscclpp_pictures(module, options)
    raise PlancError(f"pictures and traces are drawn for ARK plans, Gemini schedules, TT "
                     f"plans and MSCCL++ plans, not {fmt} documents{SCHEDULE_FIRST.get(fmt, '')}")


SCHEDULE_FIRST = {
    "ark-model": " (a model has no schedule: draw the plan of `planc MODEL -t ark`, `-t tt` or "
                 "`-t gemini`)",
    "gemini-layers": " (a layer description has no schedule: draw the plan of `planc LAYERS -t "
                     "gemini`)",
}
"""How to get a picture from a document that has no schedule."""


def ark_plan_pictures(module: ModuleOp, arch: str | None = None) -> list[Picture]:
    from dialects import ark
    from dialects.plan import buffer_layout
    from targets.ark.cost_model import plan_cost
    from targets.ark.plan_simulator import plan_device, single

    p = single(module)
    device, _ = plan_device(p, arch)
    cost = plan_cost(p, device)
    layout = buffer_layout(p)
    operators = p.task_operators()
    buffers_of: dict[int, set[int]] = {}
    args_of: dict[int, dict[str, Any]] = {}
    for task, ops in operators.items():
        tensors = {v.type.tensor_id: v.type for op in ops for v in [*op.operands, *op.results]
                   if isinstance(v.type, ark.TensorType)}
        buffers_of[task] = {t.buffer_id for t in tensors.values()
                            if t.buffer_id in layout.sizes}
        args_of[task] = {"task": task, "operators": [op.label.data for op in ops],
                         "op types": sorted({op.ark_type for op in ops}),
                         "tensors": sorted(tensors)[:16],
                         "buffer bytes": sum(layout.sizes[b] for b in buffers_of[task])}
    names = {task: "+".join(op.label.data for op in ops) for task, ops in operators.items()}
    timeline = Timeline(f"ARK plan on {device.name}: {cost.modeled_time_s * 1e6:.1f} us modeled",
                        "processor")
    # A buffer is live from the first start to the last end, in the modeled schedule, of the
    # task groups that touch it (processor groups overlap in time: their windows are not it).
    live: dict[int, list[float]] = {}
    for span in cost.spans:
        args = {**args_of.get(span.task, {}), "processor group": span.processor_group}
        for proc, start, seconds in zip(span.processors, span.start_s, span.seconds,
                                        strict=True):
            timeline.add(int(proc), start * 1e6, seconds * 1e6, names.get(span.task, "?"), args)
        first = float(span.start_s.min()) * 1e6
        last = float((span.start_s + span.seconds).max()) * 1e6
        for buffer in buffers_of.get(span.task, ()):
            window = live.setdefault(buffer, [first, last])
            window[0], window[1] = min(window[0], first), max(window[1], last)
    memory = Occupancy(f"device memory of the buffers between their first and last use "
                       f"({layout.total_bytes / 1e6:.1f} MB allocated in all)", "us",
                       {"device": step_series([(lo, hi, layout.sizes[b])
                                               for b, (lo, hi) in live.items()])})
    return [timeline, memory]


def gemini_pictures(module: ModuleOp) -> list[Picture]:
    from dialects import gemini
    from targets.gemini.model import GeminiHardware

    schedule = next(op for op in module.ops if isinstance(op, gemini.ScheduleOp))
    per_us = GeminiHardware.clock_hz / 1e6
    clock_note = f"at Gemini's {GeminiHardware.clock_hz / 1e9:g} GHz clock"
    timeline = Timeline(f"Gemini workloads per core (compute time {clock_note}; DRAM waits "
                        "not shown)", "core", kinds="layers")
    occupancy = Occupancy("L2 occupancy per core", "us",
                          capacity=schedule.buffersize.value.data)
    for core in schedule.cores:
        clock, times, used = 0.0, [], []
        for wl in core.workloads:
            cycles = float(wl.value("time") or 0)
            label = str(wl.value("layer_name") or "workload")
            nbytes = sum(int(t.value("size") or 0) for t in wl.buffer)
            timeline.add(core.id, clock / per_us, cycles / per_us, label,
                         {"layer": label, "workload": wl.id, "cycles": cycles,
                          "L2 bytes": nbytes})
            times.append(clock / per_us)
            used.append(nbytes)
            clock += cycles
        if times:
            times.append(clock / per_us)
            used.append(0)      # the core's L2 is released when its last workload ends
        occupancy.series[f"core {core.id}"] = (times, used)
    return [timeline, occupancy]


MAX_HEATMAP_CORES = 1 << 20
"""The most cells of a core map (a picture has far fewer pixels)."""


WORK_LABELS = {"matmul": "output tiles x K tiles per core", "reduce": "tiles read per core",
               "eltwise": "output tiles per core", "transpose": "output tiles per core"}
"""What a core's work counts, by kernel kind: a matmul tile costs its K steps, a reduction
its input tiles, an element-wise or data-movement tile one step."""


MAX_LINKS = 2000
"""The most transfer lines one picture draws (more would be a grey smear)."""


def mscclpp_pictures(module: ModuleOp, options: Any = None) -> list[Picture]:
    """Every thread block of every rank over the alpha-beta model's time (`planc simulate`'s
    figures): one bar per executed operation, the data moves named with their bytes and
    peers and drawn as a line from the sender to the peer's first thread block when the
    operation ends. The blocks start after the kernel launch, which the modeled time counts
    (the picture ended that much before `planc simulate`'s time)."""
    from dialects import mscclpp as ms
    from targets.mscclpp.cost import (
        TimedReplay,
        fitting_message,
        hardware_named,
        message_chunks,
        parse_size,
    )
    from targets.mscclpp.program import expand

    algorithm = next(op for op in module.ops if isinstance(op, ms.AlgorithmOp))
    hardware = hardware_named(getattr(options, "mscclpp_hw", None) or "h100")
    size_text = getattr(options, "message_size", None)
    try:
        size = parse_size(size_text) if size_text else fitting_message(algorithm)
    except ValueError as e:
        raise PlancError(f"--message-size: {e}") from None
    chunks = message_chunks(algorithm)
    if chunks == 0 or size % (chunks * algorithm.alignment):
        raise PlancError(f"no timeline for a {size}-byte message: the plan has {chunks} "
                         f"chunks of alignment {algorithm.alignment}")
    program = expand(algorithm, size // chunks)
    rows = {block: index for index, block in enumerate(sorted(program.blocks))}
    first_row = {gpu: min(i for b, i in rows.items() if b[0] == gpu) for gpu, _ in rows}
    from compiler.report import size as human_size

    timeline = Timeline("", "rank / thread block",
                        row_names={i: f"gpu {b[0]} tb {b[1]}" for b, i in rows.items()})
    launch = hardware.launch_s * 1e6

    class Recorded(TimedReplay):
        def perform(self, block, step, received) -> None:
            start = max([self.clock[block], *received]) * 1e6 + launch
            super().perform(block, step, received)
            moved = sum(r.size for m in step.moves for r in m.targets)
            peers = sorted({r.rank for m in step.moves for r in m.targets} - {step.rank})
            end = self.clock[block] * 1e6 + launch
            timeline.add(rows[block], start, end - start,
                         step.name, {"op": step.name, "bytes": moved, "to gpus": peers})
            if moved and len(timeline.links) < MAX_LINKS:
                timeline.links += [(rows[block], end, first_row[peer]) for peer in peers]

    replay = Recorded(program, hardware)
    replay.run_earliest_first(replay.clock)
    timeline.title = (f"MSCCL++ {algorithm.collective_name} of a {human_size(size)} message "
                      f"on {hardware.name} (alpha-beta model): {replay.finish_time() * 1e6:.1f}"
                      f" us modeled, from a {launch:g} us kernel launch")
    return [timeline]


def tt_pictures(module: ModuleOp, arch: str | None = None) -> list[Picture]:
    from dialects import tt
    from dialects.tt_kernels import NotAKernel, kernel_geometry

    plans = [op for op in module.walk() if isinstance(op, tt.PlanOp)]
    maps: list[Picture] = []
    timeline = _tt_timeline(plans, arch)
    if timeline is not None:
        maps += [timeline, _tt_l1(plans, timeline, arch)]
    for index, plan in enumerate(plans):
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
            values[xy[1], xy[0]] = sum(max(len_k or 1, 1) for len_k in core.len_ks())
        kind = "matmul"        # a kernel-less plan describes a GEMM
        if plan.kernel is not None:
            try:
                kind = kernel_geometry(plan.kernel.operator).kind.value
            except NotAKernel:
                kind = "eltwise"
        busy = values[values > 0]
        balance = (f"busiest {_count(values.max())}, mean of busy cores "
                   f"{_count(busy.mean())}" if busy.size else "no work")
        # Numbered as the timeline's rows, which name the same kernels.
        number = f"{index}: " if timeline is not None else ""
        maps.append(Heatmap(f"{number}{plan.label()} on {grid[0]}x{grid[1]} cores\n{balance}",
                            values, WORK_LABELS[kind]))
    return maps


def _count(value: float) -> str:
    """A count of work for a title: `1,408`, `43.7` (`:g` wrote 1.41e+03)."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _tt_l1(plans: list, timeline: Timeline, arch: str | None) -> Occupancy:
    """Each core's L1 while each kernel runs (its circular buffers and the L1 buffers live
    there, as `planc check` counts them), against the usable L1 of the device."""
    from devices.tt import device_named
    from targets.tt.check import l1_use

    device = device_named(arch)
    uses = l1_use(list(enumerate(plans)), device)
    times = [*timeline.starts, timeline.starts[-1] + timeline.durations[-1]]
    used = [use.bytes_per_core for use in uses] + [0]
    return Occupancy(f"L1 of each core while each kernel runs ({device.name}: "
                     f"{device.l1_usable_bytes / 1e6:.2f} MB usable)", "us",
                     {"L1 per core": (times, used)}, capacity=device.l1_usable_bytes)


def _tt_timeline(plans: list, arch: str | None) -> Timeline | None:
    """The kernels one after the other over the cost model's time (`planc simulate
    --cost-only`), with where each kernel's operands live; None for kernel-less plans."""
    from targets.tt.simulator import cost_only, in_dram

    with_kernel = [p for p in plans if p.kernel is not None]
    if not with_kernel or len(with_kernel) != len(plans):
        return None
    report = cost_only(with_kernel, arch)
    total = sum(k.modeled_time_s for k in report.kernels) * 1e6
    timeline = Timeline(f"TT kernels over modeled time: {total:.1f} us (on each bar where "
                        "inputs A, B and output C live)", "kernel",
                        row_names={i: f"{i}: {p.label()}" for i, p in enumerate(with_kernel)})
    clock = 0.0
    for index, (plan, kernel) in enumerate(zip(with_kernel, report.kernels, strict=True)):
        seconds = kernel.modeled_time_s * 1e6
        places = {name: "DRAM" if dram else "L1" for name, dram in in_dram(plan).items()}
        timeline.add(index, clock, seconds, kernel.name.split(" ")[0],
                     {"kernel": kernel.name,
                      "note": " ".join(f"{k}:{v}" for k, v in places.items()),
                      "tiles": kernel.tiles, "cores": kernel.cores,
                      "max tiles per core": kernel.max_tiles_per_core, "operands": places})
        clock += seconds
    return timeline


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
    if image_format not in ("png", "svg", "pdf"):
        raise PlancError(f"planc plot writes .png, .svg or .pdf images, not .{image_format}")
    with _missing_glyphs_quiet():
        figure = laid_out(pictures_)
        figure.savefig(path, dpi=110, format=image_format)
    plt.close(figure)


@contextmanager
def _missing_glyphs_quiet() -> Iterator[None]:
    """Names from the input may hold characters the font lacks (CJK, NUL): matplotlib draws a
    box and warned once per glyph on stderr, after a successful run."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing from", category=UserWarning)
        yield


def laid_out(pictures_: list[Picture]):
    """The matplotlib figure of `pictures_`, laid out (what `draw` saves)."""
    import matplotlib.pyplot as plt

    # Timelines and curves across the whole width; heatmaps side by side below them, three to
    # a row (one heatmap alone keeps a square-ish canvas instead of a wide empty one).
    wide = [p for p in pictures_ if not isinstance(p, Heatmap)]
    maps = [p for p in pictures_ if isinstance(p, Heatmap)]
    columns = min(3, len(maps)) or 1
    map_rows = -(-len(maps) // columns)
    width = 11 if wide or columns > 1 else 6
    heights = [3.6] * len(wide) + [4.2] * map_rows
    figure = plt.figure(figsize=(max(width, 4.6 * columns), sum(heights)))
    grid = figure.add_gridspec(len(heights), columns, height_ratios=heights)
    for row, picture in enumerate(wide):
        DRAWERS[type(picture)](picture, figure.add_subplot(grid[row, :]))
    for index, picture in enumerate(maps):
        row, column = divmod(index, columns)
        DRAWERS[Heatmap](picture, figure.add_subplot(grid[len(wide) + row, column]))
    with _missing_glyphs_quiet():
        # Room between heatmaps for each one's colour-bar label: it ran into the next map's
        # "core y".
        figure.tight_layout(w_pad=3.0 if maps else None)
        _drop_overflowing_notes(figure)
    return figure


LEGEND_KINDS = 9
"""Legends name the kinds that take the most time, each in its own colour of tab10 (its grey
left out for "others"); the rest share one grey "others"."""
OTHERS_COLOUR = "#b0b0b0"


def legend_kinds(labels: list[str], durations: list[float]) -> dict[str, Any]:
    """Colour of each label: the `LEGEND_KINDS` longest in total get distinct colours, every
    other label the grey of "others"."""
    import matplotlib.pyplot as plt

    total: dict[str, float] = {}
    for label, duration in zip(labels, durations, strict=True):
        total[label] = total.get(label, 0.0) + duration
    ranked = sorted(total, key=lambda k: (-total[k], k))
    palette = [plt.get_cmap("tab10")(i) for i in (0, 1, 2, 3, 4, 5, 6, 8, 9)]
    colours = {k: palette[i] for i, k in enumerate(ranked[:LEGEND_KINDS])}
    return {k: colours.get(k, OTHERS_COLOUR) for k in ranked}


def _integer_rows(ax, rows: list[int], names: dict[int, str] | None = None) -> None:
    """Rows are processors, cores or kernels: integer ticks, each row's own where few."""
    from matplotlib.ticker import MaxNLocator

    present = sorted(set(rows))
    if len(present) <= 16:
        ax.set_yticks(present)
        if names:
            ax.set_yticklabels([names.get(r, str(r)) for r in present], fontsize=7)
        return _row_limits(ax, present)
    # Many named rows (thread blocks of several GPUs): one tick where a group begins, named
    # by what the rows of the group share ("gpu 3" of "gpu 3 tb 0".."gpu 3 tb 7"); rows that
    # are all different (TT kernels) keep integer ticks, which the heatmaps' titles repeat.
    group = {r: (names or {}).get(r, str(r)).split(" tb ")[0] for r in present}
    starts = [r for i, r in enumerate(present) if i == 0 or group[r] != group[present[i - 1]]]
    if names and len(starts) < len(present):
        ax.set_yticks(starts)
        ax.set_yticklabels([group[r] for r in starts], fontsize=7)
    else:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    _row_limits(ax, present)


def _row_limits(ax, present: list[int]) -> None:
    low, high = (present[0], present[-1]) if present else (0, 0)
    ax.set_ylim(high + 0.6, low - 0.6)      # row 0 at the top


def _draw_timeline(t: Timeline, ax) -> None:
    import matplotlib.pyplot as plt

    colour_of = legend_kinds(t.labels, t.durations)
    ax.barh(t.rows, t.durations, left=t.starts, height=0.9,
            color=[colour_of[label] for label in t.labels], linewidth=0)
    ax.set_xlabel(f"time ({UNIT_NAMES.get(t.unit, t.unit)})")
    ax.set_ylabel(t.row_label)
    _integer_rows(ax, t.rows, t.row_names)
    ax.set_xlim(left=0)
    ax.set_title(t.title)
    _write_notes(t, ax)
    for source, time, target in t.links:     # a transfer: from its sender to the peer
        ax.plot([time, time], [source, target], color="black", linewidth=0.4, alpha=0.5)
    named = [k for k, c in colour_of.items() if c != OTHERS_COLOUR]
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour_of[k]) for k in named]
    labels = [k[:40] for k in named]
    others = len(colour_of) - len(named)
    if others:
        handles.append(plt.Rectangle((0, 0), 1, 1, color=OTHERS_COLOUR))
        labels.append(f"{others} others")
    ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0),
              title=f"{len(colour_of)} {t.kinds}, by time" if others else None,
              title_fontsize=7)


UNIT_NAMES = {"us": "µs"}


def _write_notes(t: Timeline, ax) -> None:
    """A bar's `note` (a TT kernel's operand places) written on it, where bars are few; a note
    wider than its bar is removed once the figure is laid out (`_drop_overflowing_notes`): it
    spilled over the bars beside it (the trace's `args` keep it)."""
    if len(t.rows) > 64:
        return
    notes = []
    for row, start, duration, args in zip(t.rows, t.starts, t.durations, t.args, strict=True):
        if args.get("note"):
            text = ax.text(start + duration / 2, row, args["note"], ha="center", va="center",
                           fontsize=6, color="black")
            notes.append((text, start, duration, row))
    ax.planc_notes = notes


def _drop_overflowing_notes(figure) -> None:
    renderer = figure.canvas.get_renderer()
    for ax in figure.axes:
        for text, start, duration, row in getattr(ax, "planc_notes", ()):
            (left, _), (right, _) = ax.transData.transform([(start, row),
                                                            (start + duration, row)])
            if text.get_window_extent(renderer).width > 0.95 * (right - left):
                text.remove()


def _draw_occupancy(o: Occupancy, ax) -> None:
    for name, (times, used) in o.series.items():
        ax.step(times, np.asarray(used) / 1e6, where="post", label=name, linewidth=1)
    if o.capacity:
        ax.axhline(o.capacity / 1e6, color="red", linestyle="--", label="capacity")
    ax.set_xlabel(f"time ({UNIT_NAMES.get(o.unit, o.unit)})")
    ax.set_ylabel("MB in use (10^6 bytes)")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.set_title(o.title)
    if len(o.series) <= 16:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _draw_heatmap(h: Heatmap, ax) -> None:
    from matplotlib.ticker import MaxNLocator

    # From zero, so an idle core reads as dark; the numbers take the colour that stands out
    # on their cell (dark on the light end of the scale, white on the dark end).
    image = ax.imshow(h.values, cmap="Blues", origin="upper", vmin=0,
                      vmax=max(float(h.values.max()), 1.0))
    for axis, size in ((ax.xaxis, h.values.shape[1]), (ax.yaxis, h.values.shape[0])):
        if size <= 16:
            axis.set_ticks(range(size))
        else:
            axis.set_major_locator(MaxNLocator(integer=True))
    if h.values.size <= 64:
        for (y, x), value in np.ndenumerate(h.values):
            red, green, blue, _ = image.cmap(image.norm(value))
            light = 0.299 * red + 0.587 * green + 0.114 * blue > 0.5
            ax.text(x, y, f"{value:g}", ha="center", va="center", fontsize=7,
                    color="black" if light else "white")
    ax.set_xlabel("core x")
    ax.set_ylabel("core y")
    ax.set_title(h.title, fontsize=9)
    bar = ax.figure.colorbar(image, ax=ax, label=h.label, fraction=0.046, pad=0.04)
    bar.locator = MaxNLocator(integer=True)
    bar.update_ticks()


DRAWERS = {Timeline: _draw_timeline, Occupancy: _draw_occupancy, Heatmap: _draw_heatmap}


# ---------------------------------------------------------------------------------------------
# Chrome traces
# ---------------------------------------------------------------------------------------------


def chrome_trace(pictures_: list[Picture]) -> str:
    """The timelines of `pictures_` as Trace Event JSON, and each memory curve as a counter
    track. Every `ts` and `dur` is in microseconds, as the format defines them (a cycle
    timeline was converted at the clock its process name states); each span's `args` say
    what runs (operators, tensors, bytes)."""
    events: list[dict[str, Any]] = []
    pid = 0
    for picture in pictures_:
        if isinstance(picture, Timeline):
            events += _timeline_events(picture, pid)
        elif isinstance(picture, Occupancy):
            events += _counter_events(picture, pid)
        else:
            continue
        pid += 1
    if not any(e["ph"] in ("X", "C") for e in events):
        raise PlancError("nothing to trace: the document has no schedule the cost model times")
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ms",
                       "otherData": {"time unit": "microseconds (ts, dur)"}})


def _timeline_events(t: Timeline, pid: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": pid,
                                     "args": {"name": t.title}}]
    for row in sorted(set(t.rows)):
        events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": row,
                       "args": {"name": t.row_names.get(row, f"{t.row_label} {row}")}})
    for row, start, duration, label, args in zip(t.rows, t.starts, t.durations, t.labels,
                                                 t.args, strict=True):
        events.append({"name": label, "ph": "X", "pid": pid, "tid": row, "ts": start,
                       "dur": duration, "args": args})
    return events


def _counter_events(o: Occupancy, pid: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": pid,
                                     "args": {"name": o.title}}]
    for name, (times, used) in o.series.items():
        events += [{"name": f"{name} bytes", "ph": "C", "pid": pid, "ts": time,
                    "args": {"bytes": nbytes}} for time, nbytes in zip(times, used, strict=True)]
    return events
