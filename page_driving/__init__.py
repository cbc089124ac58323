"""Driving the served page as a visitor does, shared by the tests and the benchmarks: serving the app
(``server``), Debian's chromium (``chromium``), the page's figures (``figures``), the visitor's steps in Playwright's
async API (``steps``), classrooms of browser or script sessions (``classroom``, ``script_classroom``) and the tiny
random-init checkpoints they serve (``tiny_models``)."""
