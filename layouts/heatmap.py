"""The one heatmap builder the views configure: a figure of unit cells drawn by one image glyph on a colour mapper,
its colour bar and axis names, and the fill that puts a matrix in and fits both ranges to its cells. The norms, the
comparison, the attention and the cosine views use it; the lens and patching grids draw cells of their own (text
in each cell, a cell to click)."""

from __future__ import annotations

import numpy as np
from bokeh.models import ColumnDataSource
from bokeh.plotting import figure

from .style import add_color_bar, cells_range, image_source, readable_figure, show_matrix

SLANTED = 0.9  # radians: a token axis's labels slanted, so long ones do not run into each other


def heatmap(name: str, mapper, color_title: str, *, tooltips: list, rows_down: bool = False, x_label: str = "",
            y_label: str = "", slanted_x: bool = False, y_range: tuple = (), image_y: float = -0.5,
            **figure_options) -> tuple[figure, ColumnDataSource]:
    """An empty heatmap (figure ``name``) on ``mapper`` with its colour bar, and the image source its matrix lives
    in (a run swaps the data in place). ``rows_down`` puts row 0 at the top; ``y_range`` and ``image_y`` place a
    matrix whose rows are not one unit each."""
    rows = y_range or ((0.5, -0.5) if rows_down else (-0.5, 0.5))
    fig = readable_figure(name=name, x_range=(-0.5, 0.5), y_range=rows, tooltips=tooltips, **figure_options)
    source = image_source(fig, mapper, y=image_y)
    if slanted_x:
        fig.xaxis.major_label_orientation = SLANTED
    if x_label:
        fig.xaxis.axis_label = x_label
    if y_label:
        fig.yaxis.axis_label = y_label
    add_color_bar(fig, mapper, color_title)
    return fig, source


def show_cells(fig: figure, source: ColumnDataSource, matrix: np.ndarray, *, rows_down: bool = False) -> None:
    """Draw ``matrix`` [rows, columns] into a ``heatmap`` and fit its ranges to one unit cell per entry."""
    show_matrix(source, matrix)
    cells_range(fig.x_range, matrix.shape[1])
    cells_range(fig.y_range, matrix.shape[0], flipped=rows_down)
