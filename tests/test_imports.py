"""What importing the page costs: the page is drawn before torch is loaded (``model_backend/__init__.py`` stays lazy),
and the backend's modules import in any order (no cycle: ``LoadedModel`` lives apart from the loading that
checks it)."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from model_backend import EXPORTS

HEAVY = ("torch", "transformers", "sklearn")


def imported_after(statement: str) -> set[str]:
    """The top-level modules a fresh interpreter holds after ``statement``."""
    script = f"import sys; {statement}; print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    return set(subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True,
                              cwd=".").stdout.split())


def test_the_page_imports_neither_torch_nor_transformers_nor_scikit_learn():
    assert not imported_after("import viz_app.page").intersection(HEAVY)


@pytest.mark.parametrize("module", ["loading", "loaded_model", "load_check", "capture", "readout", "tokens"])
def test_each_module_the_load_probe_uses_imports_first(module):
    """A cycle among them would fail one of these with a partly initialized module."""
    assert "model_backend" in imported_after(f"import model_backend.{module}")


def test_every_exported_name_is_importable():
    import model_backend
    for names in EXPORTS.values():
        for name in names:
            assert getattr(model_backend, name) is not None


def test_the_names_written_out_for_readers_are_the_exported_ones():
    """The ``TYPE_CHECKING`` imports of ``model_backend/__init__.py`` list exactly what ``EXPORTS`` serves lazily."""
    import model_backend
    tree = ast.parse(open(model_backend.__file__).read())
    checked = next(node for node in tree.body if isinstance(node, ast.If) and getattr(node.test, "id", "") ==
                   "TYPE_CHECKING")
    written = {(node.module, alias.name) for node in checked.body for alias in node.names}
    assert written == {(module, name) for module, names in EXPORTS.items() for name in names}
