"""What a served process sets once, before its first page: ``main.py`` calls ``tune_server_process``. A notebook's
interpreter is left as it is."""

from __future__ import annotations

import sys

from .held_collections import hold_collections_in_this_server
from .model_work import compute_on_one_core_in_this_thread
from .panel_internals import send_every_queued_patch

MODEL_SWITCH_SECONDS = 0.0005


def tune_server_process() -> None:
    """Tune this process for serving pages:

    - a model thread takes the interpreter back 0.5 ms after a torch operation ends instead of Python's 5 ms: a
      pass needs it between its operations while the event loop holds it to serialize other students' pages;
    - only the wide model thread computes on several cores (``model_work.py`` says why);
    - a class's runs hold Python's automatic collections (``held_collections.py``);
    - Panel's write queue sends every queued patch (``panel_internals.py``).
    """
    sys.setswitchinterval(MODEL_SWITCH_SECONDS)
    compute_on_one_core_in_this_thread()
    hold_collections_in_this_server()
    send_every_queued_patch()
