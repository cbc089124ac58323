"""Driving the served page as a visitor does, shared by the tests and the benchmarks: serving the app
(``server``), Debian's chromium (``chromium``), where things are on the page (``locators``), the visitor's steps in
Playwright's async API (``steps``) and the same steps in its sync API (``sync_steps``), classrooms of browser or script
sessions (``classroom``, ``script_classroom``) and the tiny random-init checkpoints they serve (``tiny_models``)."""
