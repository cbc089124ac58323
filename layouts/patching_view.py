"""Activation patching as heatmaps, block x position: how much of the clean answer comes back when one value of the
corrupted run is the clean run's. One heatmap for the stream (``layer_output``), one per sublayer's write, filled
block by block as the rows come; the two exactness checks as numbers; a click on a cell pins that value's card; the
lesson's columns outlined on the stream's grid, named under it."""

from __future__ import annotations

import html
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import panel as pn
from bokeh.models import ColumnDataSource, HoverTool, LinearColorMapper, TapTool
from bokeh.palettes import RdBu11

from model_backend.tokens import visible_token

from .highlight import column_boxes, marks_for, outside_labels, show_highlight
from .style import add_color_bar, cells_range, readable_figure, show_ticks, spaced_ticks
from .tab_view import TabView

if TYPE_CHECKING:  # the patching module imports torch; the view only reads its arrays
    from model_backend.families import Family
    from model_backend.patching import Patching

SITE_TITLES = {"layer_output": "the stream: block output (layer_output)",
               "attention_output": "attention's write (attention_output)", "mlp_output": "MLP's write (mlp_output)"}
COLOR_BAR_TITLE = "recovered: 0 = corrupted, 1 = clean"
# Blue for the clean answer recovered, white for none, red for a patch that pushes further toward the wrong token.
RECOVERY_MAPPER = dict(palette=tuple(reversed(RdBu11)), low=-1.0, high=1.0, nan_color="#eeeeee")
EMPTY_CELLS = {"x": [], "y": [], "recovered": [], "raw": [], "token": [], "block": []}


def part_for_site(family: Family, site: str, layer: int) -> str:
    """The diagram part whose card shows a patched value: the block for its output, else the sublayer (its
    post-norm where the family writes through one)."""
    if site == "layer_output":
        return f"block.{layer}"
    sublayer = "attention" if site == "attention_output" else "mlp"
    post_norm = f"{sublayer}_post_norm"
    return f"{post_norm if family.module_path(post_norm, 0) is not None else sublayer}.{layer}"


def patching_heatmap(site: str, *, height: int) -> tuple:
    """An empty block x position heatmap (figure ``patching_<site>``) of rect cells, with hover and tap."""
    cells = ColumnDataSource(dict(EMPTY_CELLS), name=f"patching_{site}_cells")
    mapper = LinearColorMapper(**RECOVERY_MAPPER)
    fig = readable_figure(name=f"patching_{site}", height=height, title=SITE_TITLES[site], x_range=(-0.5, 0.5),
                          y_range=(0.5, -0.5), tools="reset,save")
    rects = fig.rect("x", "y", width=1, height=1, source=cells, line_color=None,
                     fill_color={"field": "recovered", "transform": mapper}, selection_line_color="black",
                     selection_line_width=3, nonselection_fill_alpha=1.0)
    fig.add_tools(TapTool(renderers=[rects]), HoverTool(renderers=[rects], tooltips=[
        ("block", "@block"), ("position", "@token"), ("recovered", "@recovered{0.00}"),
        ("logit difference", "@raw{0.000}")]))
    fig.xaxis.axis_label = "position patched (the clean prompt's token)"
    fig.yaxis.axis_label = "block"
    fig.grid.visible = False
    return fig, cells, mapper


def metric_line(patching: Patching) -> str:
    """What the cells measure and the two runs' values (tokens escaped, whitespace visible)."""
    pair = patching.pair
    answer, wrong = (html.escape(visible_token(token)) for token in (pair.answer, pair.wrong))
    return (f"<p class='patching-metric'>Logit difference <code>{answer}</code> − <code>{wrong}</code> at the last "
            f"position: clean run <b>{pair.clean_metric:.3f}</b>, corrupted run <b>{pair.corrupted_metric:.3f}</b>. "
            f"Each cell reruns the corrupted prompt with one value taken from the clean run.</p>")


def checks_line(patching: Patching) -> str:
    """The two identities, as numbers: every position of a block's output patched gives the clean run, none the
    corrupted run (the largest difference over the blocks done)."""
    done = patching.blocks_done
    if done == 0:
        return ""
    rounding = ("" if patching.pair.precision == "float32" else
                f" (the model computes in {patching.pair.precision}, whose rounding depends on how many rows run "
                "together; in float32 both are of the order of 1e-5 or less)")
    return (f"<p class='patching-check'>Check over {done} block{'s' * (done != 1)}: all positions of a block's output "
            f"patched → clean run to <b>{patching.clean_check:.1e}</b>; nothing patched → corrupted run to "
            f"<b>{patching.corrupted_check:.1e}</b>{rounding}.</p>")


def recovered(patching: Patching, site: str) -> np.ndarray:
    """The share of the clean answer each cell recovers, or zeros when the two runs' metrics are equal."""
    if abs(patching.pair.clean_metric - patching.pair.corrupted_metric) < 1e-6:
        return np.zeros_like(patching.grids[site])
    return patching.normalised(site)


def position_labels(patching: Patching) -> list[str]:
    """``position:token`` for each position, ``corrupted→clean`` where the two prompts' tokens differ (canvas text)."""
    pair = patching.pair
    return [f"{p}:{visible_token(corrupted)}" if corrupted == clean else
            f"{p}:{visible_token(corrupted)}→{visible_token(clean)}"
            for p, (corrupted, clean) in enumerate(zip(pair.corrupted.tokens, pair.clean.tokens))]


def axis_labels(patching: Patching) -> dict[int, str]:
    """The clean run's tokens alone (what a patch brings in), short enough for the axis to keep the swapped one at a
    projector's font; the tooltip names position and both tokens."""
    return {p: visible_token(token) for p, token in enumerate(patching.pair.clean.tokens)}


def cells_of(patching: Patching, site: str) -> dict:
    """The computed rows of one grid as rect cells: position, block, share recovered, raw metric, token."""
    labels = position_labels(patching)
    shares, grid = recovered(patching, site), patching.grids[site]
    blocks, positions = np.nonzero(np.isfinite(grid))
    return {"x": positions, "y": blocks, "recovered": shares[blocks, positions], "raw": grid[blocks, positions],
            "token": [labels[p] for p in positions], "block": blocks}


class PatchingView(TabView):
    """The corrupted prompt and the two tokens, the metric and the checks, and the three heatmaps filling in."""

    watches = ("run", "patching", "patching_note", "highlight")

    def build(self) -> None:
        self.figures, self.cells = {}, {}
        for site, height in (("layer_output", 430), ("attention_output", 360), ("mlp_output", 360)):
            fig, cells, mapper = patching_heatmap(site, height=height)
            cells.selected.on_change("indices", partial(self._on_tap, site))
            self.figures[site], self.cells[site] = fig, cells
        add_color_bar(self.figures["layer_output"], mapper, COLOR_BAR_TITLE)
        outside_labels(self.figures["layer_output"])  # made with the figure, as the lens's (BokehJS finds its view)
        self.about = pn.pane.HTML("Run a prompt, then patch it with a corrupted one.")
        self.checks = pn.pane.HTML("")
        self.pinned_note = pn.pane.HTML("")

    def refresh(self) -> None:
        run, patching, note = self.state.run, self.state.patching, self.state.patching_note
        if run is None:
            return
        if patching is None:
            for site, fig in self.figures.items():
                self.cells[site].data = dict(EMPTY_CELLS)
                fig.title.text = f"Patched: {SITE_TITLES[site]} · {run.seq_len} tokens · not patched yet"
            show_highlight(self.figures["layer_output"], [], labels_outside=True)
            self.checks.object = ""
            if note:
                self.about.object = f"<p class='patching-note'>No patching: {html.escape(note)}</p>"
                return
            self.about.object = "<p>Running the corrupted prompt…</p>"
            self.state.param.trigger("patching_requested")
            return
        pair = patching.pair
        n_layers, seq = pair.corrupted.n_layers, pair.corrupted.seq_len
        progress = "" if patching.complete else f" · {patching.blocks_done} of {n_layers} blocks so far"
        labels = axis_labels(patching)
        for site, fig in self.figures.items():
            self.cells[site].data = cells_of(patching, site)
            cells_range(fig.x_range, seq)
            cells_range(fig.y_range, n_layers, flipped=True)
            show_ticks(fig.xaxis, range(seq))
            fig.xaxis.major_label_overrides = labels
            show_ticks(fig.yaxis, spaced_ticks(n_layers))
            fig.title.text = f"Patched: {SITE_TITLES[site]} · {seq} tokens{progress}"
        show_highlight(self.figures["layer_output"], column_boxes(marks_for(self.state, "patching_layer_output"),
                                                                  n_layers), labels_outside=True)
        self.about.object = metric_line(patching)
        self.checks.object = checks_line(patching)

    def _on_tap(self, site: str, _attr, _old, indices) -> None:
        if indices:
            cells = self.cells[site].data
            # Changing Panel and Bokeh models from inside a Bokeh callback: leave it to the next tick.
            pn.state.execute(partial(self.pin, site, int(cells["y"][indices[0]]), cells["token"][indices[0]]),
                             schedule=True)

    def pin(self, site: str, layer: int, token: str) -> None:
        """Pin the card of the value a cell patched (once) and say where it is shown; the cell stays outlined."""
        part = part_for_site(self.state.family, site, layer)
        if part not in self.state.pinned:
            self.state.pinned = [*self.state.pinned, part]
        self.pinned_note.object = (f"<p class='patching-pinned'>Pinned the card of <code>layers.{layer}.{site}</code> "
                                   f"(patched at {html.escape(token)}; part <code>{html.escape(part)}</code>): it is "
                                   f"shown in the <b>Block diagram</b> tab.</p>")

    def layout(self):
        inputs = pn.FlexBox(
            pn.widgets.TextInput.from_param(self.state.param.corrupted_prompt, width=320,
                                            placeholder="the prompt with one word changed"),
            pn.widgets.TextInput.from_param(self.state.param.patch_answer, width=180,
                                            placeholder="top prediction"),
            pn.widgets.TextInput.from_param(self.state.param.patch_wrong, width=180,
                                            placeholder="corrupted top"))
        figure = partial(pn.pane.Bokeh, sizing_mode="stretch_width")
        return pn.Column(inputs, self.about, self.checks, figure(self.figures["layer_output"]), self.pinned_note,
                         figure(self.figures["attention_output"]), figure(self.figures["mlp_output"]))
