"""Views of a captured run, built from plain arrays and backend results (never running a model); usable in a
notebook through ``viz_app.notebook``."""
