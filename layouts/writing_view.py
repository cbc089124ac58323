"""The Write tab: the settings of a generation and of a steering, the text as it is written (each token with its
probability and the five alternatives of its step), the commitment strip (each written token coloured by the first
block whose logit lens has it on top; a click opens the lens there) and, when steered, the plain continuation beside
the steered one with the first differing token marked. Branches, several texts of one prompt, are listed one per
row with the step where they part marked; each step's alternatives are buttons that continue the shown branch."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import panel as pn
from bokeh.models import ColumnDataSource, HoverTool, TapTool
from bokeh.palettes import Viridis256

from model_backend.tokens import visible_token

from .highlight import box, marks_for, show_highlight
from .state import BranchAsk
from .style import readable_figure
from .tab_view import TabView

NEVER_COLOR = "#bbbbbb"  # a token only the final readout puts on top
PAGE_MAX_NEW_TOKENS = 128
# two short lines: a figure is at least as wide as its title, and the main area beside the sidebar at 1024 is narrow
STRIP_TITLE = "Commitment: the first block whose logit lens\nputs each written token on top"


@dataclass(frozen=True)
class WrittenText:
    """A continuation as the view draws it: plain strings and numbers, one entry per written token."""

    prompt_tokens: list[str]
    tokens: list[str]
    probabilities: list[float]
    alternatives: list[list[tuple[str, float]]]  # the step's five likeliest tokens, likeliest first
    n_layers: int
    settings: str  # how it was written, in words ("greedy", "sampled: T 0.8, top-k 50, top-p 1, seed 3")
    commitment: list[int] | None = None  # per token: the first block whose lens has it on top; -1: never
    done: bool = False  # captured in one pass: the other tabs show it
    steering: str = ""  # "+4·v at block 10 (toward ␣dog, away from ␣cat)"; empty when not steered
    plain: list[str] | None = field(default=None)  # the unsteered continuation, for comparison
    token_ids: list[int] = field(default_factory=list)  # the written tokens' ids
    alternative_ids: list[list[int]] = field(default_factory=list)  # the alternatives' token ids, step by step
    label: str = ""  # which branch: "seed 3", or "step 4 → ␣the" for one continued from an alternative


def first_difference(a: list[str], b: list[str]) -> int | None:
    """The first index where two continuations differ (the shorter one's end when one extends the other)."""
    for index, (one, other) in enumerate(zip(a, b)):
        if one != other:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def block_color(block: int, n_layers: int) -> str:
    """Viridis from the first block (dark) to the last (yellow); grey for never."""
    if block < 0:
        return NEVER_COLOR
    return Viridis256[int(round(block / max(n_layers - 1, 1) * 255))]


def alternatives_text(alternatives: list[tuple[str, float]]) -> str:
    return ", ".join(f"{visible_token(token)} {probability:.2f}" for token, probability in alternatives)


def written_html(written: WrittenText) -> str:
    """The prompt in grey and each written token as a chip (escaped, whitespace visible) with its probability and
    alternatives in its tooltip."""
    prompt = html.escape("".join(written.prompt_tokens))
    chips = []
    for index, (token, probability) in enumerate(zip(written.tokens, written.probabilities)):
        color = (block_color(written.commitment[index], written.n_layers) if written.commitment is not None
                 else "#1f77b4")
        tip = html.escape(f"p = {probability:.3f} · alternatives: {alternatives_text(written.alternatives[index])}",
                          quote=True)
        chips.append(f"<span class='written-token' title='{tip}' style='border-bottom: 4px solid {color}'>"
                     f"{html.escape(visible_token(token))}</span>")
    return f"<p class='written-text'><span class='written-prompt'>{prompt}</span>{''.join(chips)}</p>"


def steps_table(written: WrittenText) -> str:
    """Each step: the token chosen, its probability, and the five alternatives of that step."""
    rows = "".join(f"<tr><td>{index + 1}</td><td><code>{html.escape(visible_token(token))}</code></td>"
                   f"<td>{probability:.3f}</td><td>{html.escape(alternatives_text(alternatives))}</td></tr>"
                   for index, (token, probability, alternatives)
                   in enumerate(zip(written.tokens, written.probabilities, written.alternatives)))
    return ("<table class='write-steps'><tr><th>step</th><th>token</th><th>p</th><th>top 5 at that step</th></tr>"
            f"{rows}</table>")


def comparison_html(written: WrittenText) -> str:
    """The steered and the plain continuations one above the other, the first differing token marked."""
    if written.plain is None:
        return ""
    differs = first_difference(written.tokens, written.plain)

    def line(tokens: list[str]) -> str:
        return "".join(f"<mark>{html.escape(visible_token(token))}</mark>" if index == differs
                       else html.escape(token) for index, token in enumerate(tokens))
    where = ("the two are the same" if differs is None
             else f"they part at written token {differs + 1} (marked)")
    return (f"<p class='write-compare'><b>steered</b> ({html.escape(written.steering)}): {line(written.tokens)}<br>"
            f"<b>plain</b>: {line(written.plain)}<br>{where}</p>")


def branch_rows_html(texts: list[WrittenText], parting: int | None) -> list[str]:
    """One line per branch: its label and written tokens, the token at the step where the seeded branches part
    marked."""
    def row(written: WrittenText) -> str:
        tokens = "".join(f"<mark>{html.escape(visible_token(token))}</mark>" if index == parting
                         else html.escape(token) for index, token in enumerate(written.tokens))
        return f"<span class='branch-text'><b>{html.escape(written.label)}</b>: {tokens}</span>"
    return [row(written) for written in texts]


def parting_words(texts: list[WrittenText], parting: int | None) -> str:
    if len(texts) < 2:
        return ""
    if parting is None:
        return (f"<p class='branch-parting'>The {len(texts)} branches write the same text: greedy decoding writes "
                f"one text whatever the seed (tick <i>sample</i> to let them part).</p>")
    return (f"<p class='branch-parting'>The branches part at written token {parting + 1} (marked): before it they "
            f"read the same text, so its five alternatives are the same for all of them.</p>")


def alternative_choices(written: WrittenText, step: int) -> list[tuple[str, int, bool]]:
    """A step's alternatives as (label, token id, whether it is the token written there)."""
    return [(f"{visible_token(token)} {probability:.2f}", token_id, token_id == written.token_ids[step])
            for (token, probability), token_id in zip(written.alternatives[step], written.alternative_ids[step])]


class WritingView(TabView):
    """Write's settings, its text as it comes, the commitment strip and the steered-against-plain comparison."""

    watches = ("writing", "write_check", "run", "highlight", "branch_texts", "branch_parting", "shown_branch",
               "branch_step")

    def build(self) -> None:
        state = self.state
        widget = pn.widgets
        self.controls = pn.FlexBox(
            widget.Button.from_param(state.param.write_requested, color="primary", width=90, description=None),
            widget.Button.from_param(state.param.stop_requested, width=90, description=None),
            widget.IntInput.from_param(state.param.max_new_tokens, width=140),
            widget.Checkbox.from_param(state.param.sample, width=110),
            widget.FloatInput.from_param(state.param.temperature, width=150),
            widget.IntInput.from_param(state.param.top_k, width=110),
            widget.FloatInput.from_param(state.param.top_p, width=110),
            widget.IntInput.from_param(state.param.seed, width=110),
            widget.IntInput.from_param(state.param.branches, width=120), sizing_mode="stretch_width")
        self.steering = pn.FlexBox(
            widget.Checkbox.from_param(state.param.steer, width=100),
            widget.IntInput.from_param(state.param.steer_block, width=150),
            widget.TextInput.from_param(state.param.steer_toward, width=150),
            widget.TextInput.from_param(state.param.steer_away, width=150),
            widget.FloatInput.from_param(state.param.steer_alpha, width=110), sizing_mode="stretch_width")
        self.text = pn.pane.HTML("", sizing_mode="stretch_width")
        self.compare = pn.pane.HTML("", sizing_mode="stretch_width")
        self.check = pn.pane.HTML("", sizing_mode="stretch_width")
        self.table = pn.pane.HTML("", sizing_mode="stretch_width")
        self.parting = pn.pane.HTML("", sizing_mode="stretch_width")
        self.branch_rows = pn.Column(sizing_mode="stretch_width")
        self.alternatives_shown = None  # (text, step) whose alternatives the buttons offer
        self.alternatives = pn.FlexBox(sizing_mode="stretch_width")
        self.branching = pn.Row(widget.IntInput.from_param(state.param.branch_step, width=150), self.alternatives,
                                sizing_mode="stretch_width", visible=False)
        self.strip_cells = ColumnDataSource({"x": [], "token": [], "color": [], "block": [], "p": [],
                                             "position": []}, name="commitment_cells")
        self.strip = readable_figure(name="commitment_strip", height=170, x_range=(-0.5, 0.5), y_range=(-0.5, 0.5),
                                     tools="save", title=STRIP_TITLE)
        cells = self.strip.rect("x", 0, width=0.95, height=1, source=self.strip_cells, fill_color="color",
                                line_color=None, nonselection_fill_alpha=1.0, selection_line_color="black",
                                selection_line_width=3)
        self.strip.text("x", 0, text="token", source=self.strip_cells, text_align="center", text_baseline="middle",
                        text_color="white", text_font_size="16px", text_outline_color="black")
        self.strip.add_tools(TapTool(renderers=[cells]), HoverTool(renderers=[cells], tooltips=[
            ("token", "@token"), ("first on top at", "@block"), ("p", "@p{0.000}"), ("position", "@position")]))
        self.strip.yaxis.visible = False
        self.strip.xaxis.axis_label = "written token (a click opens the logit lens at its position)"
        self.strip.grid.visible = False
        self.strip_cells.selected.on_change("indices", self._on_tap)

    def layout(self) -> pn.viewable.Viewable:
        about = pn.pane.HTML("<p class='write-about'>Write continues the prompt one token at a time, each step one "
                             "pass against the model's key/value cache. Greedy takes the likeliest token; "
                             "<i>sample</i> draws with temperature, top-k and top-p from the seed shown, so a "
                             "continuation replays exactly. <i>steer</i> adds α·(toward − away) to the chosen "
                             "block's input at every position: the two texts' <code>layer_input</code> at their "
                             "last position, each run as the prompt is.</p>", sizing_mode="stretch_width")
        return pn.Column(about, self.controls, self.steering, self.text, self.compare, self.check, self.parting,
                         self.branch_rows, self.branching, pn.pane.Bokeh(self.strip, sizing_mode="stretch_width"),
                         self.table, sizing_mode="stretch_width")

    def refresh(self) -> None:
        written = self.state.writing
        self.check.object = self.state.write_check
        if written is None:
            self.text.object = "<p class='written-text'>Press Write to continue the prompt.</p>"
            self.compare.object = self.table.object = ""
            self.strip_cells.data = {key: [] for key in self.strip_cells.data}
            return
        status = ("captured in one pass: every tab shows the prompt and the written tokens" if written.done
                  else f"writing… {len(written.tokens)} so far")
        self.text.object = (written_html(written)
                            + f"<p class='write-status'>{html.escape(written.settings)} · {status}</p>")
        if not written.done and not self.state.branch_texts:  # while it writes, each step sends its token alone
            if self.table.object:  # (each chip's tooltip has its alternatives): the last text's parts cleared once
                self.compare.object = self.table.object = self.parting.object = ""
                self.strip_cells.data = {key: [] for key in self.strip_cells.data}
                self.branch_rows[:] = []
                self.branching.visible = False
            return
        self.compare.object = comparison_html(written)
        self.table.object = steps_table(written)
        self.show_commitment(written)
        self.show_branches(written)

    def show_branches(self, written: WrittenText) -> None:
        """A row per branch with a button that shows it in every tab, and once the shown text is captured, the
        alternatives of its chosen step as buttons that continue it from there."""
        state, texts = self.state, self.state.branch_texts
        self.parting.object = parting_words(texts, state.branch_parting)
        rows = branch_rows_html(texts, state.branch_parting)
        if len(self.branch_rows) != len(rows):
            self.branch_rows[:] = [pn.Row(pn.widgets.Button(label="show", width=90, on_click=self.show(index)),
                                          pn.pane.HTML(sizing_mode="stretch_width"), sizing_mode="stretch_width")
                                   for index in range(len(rows))]
        for index, (row, line) in enumerate(zip(self.branch_rows, rows)):
            button, text = row
            button.label, button.disabled = ("shown", True) if index == state.shown_branch else ("show",
                                                                                                 not written.done)
            text.object = line
        self.branching.visible = written.done and bool(written.tokens)
        if not self.branching.visible:
            return
        step = min(max(state.branch_step, 1), len(written.tokens)) - 1
        if self.alternatives_shown != (written, step):
            self.alternatives_shown = (written, step)
            self.alternatives[:] = [pn.pane.HTML("<span class='branch-offer'>continue from here with:</span>")] + [
                pn.widgets.Button(label=label, disabled=chosen, width=130, on_click=self.continue_with(step, token_id))
                for label, token_id, chosen in alternative_choices(written, step)]

    def show(self, index: int):
        return lambda _event: setattr(self.state, "branch_ask", BranchAsk(show=index))

    def continue_with(self, step: int, token_id: int):
        return lambda _event: setattr(self.state, "branch_ask", BranchAsk(step=step, token_id=token_id))

    def show_commitment(self, written: WrittenText) -> None:
        """The strip's cells: one per written token, coloured once the whole text is captured and read."""
        n = len(written.tokens)
        blocks = written.commitment if written.commitment is not None else [None] * n
        start = len(written.prompt_tokens)
        self.strip_cells.data = {
            "x": list(range(n)), "token": [visible_token(token) for token in written.tokens],
            "color": [NEVER_COLOR if block is None else block_color(block, written.n_layers) for block in blocks],
            "block": ["…" if block is None else ("never (only the final readout)" if block < 0 else f"block {block}")
                      for block in blocks],
            "p": list(np.round(written.probabilities, 4)), "position": list(range(start, start + n))}
        self.strip.x_range.start, self.strip.x_range.end = -0.5, max(n, 1) - 0.5
        marks = marks_for(self.state, "commitment_strip")
        show_highlight(self.strip, [box(m["at"], 0, 1, 1, m["label"], m["at"]) for m in marks if m["at"] < n],
                       middle=(n - 1) / 2)
        self.strip.title.text = STRIP_TITLE + (f" · {start + n} tokens" if written.done else " · writing…")

    def _on_tap(self, _attr, _old, new) -> None:
        if new:
            # Changing Panel and Bokeh models from inside a Bokeh callback: leave it to the next tick.
            pn.state.execute(partial(self.open_lens_at, new[0]), schedule=True)

    def open_lens_at(self, index: int) -> None:
        """Open the logit lens with the clicked written token's position on screen; the click's selection is
        cleared, so the same token clicked again opens it again."""
        self.strip_cells.selected.indices = []
        written, run = self.state.writing, self.state.run
        if written is None or run is None or not written.done:
            return
        position = min(len(written.prompt_tokens) + index, run.seq_len - 1)
        self.state.param.update(token=position, lens_window=lens_window_around(position, run.seq_len),
                                shown_tab="Logit lens")


def lens_window_around(position: int, seq_len: int, width: int = 9) -> tuple[int, int]:
    """A lens window of ``width`` positions that ends at ``position`` where it can (the position's predecessor, whose
    row predicts it, stays on screen)."""
    last = min(max(position + 1, width - 1), seq_len - 1)
    return max(last - width + 1, 0), last
