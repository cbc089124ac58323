"""The visitor's steps of ``steps.py`` in Playwright's sync API (pytest-playwright's ``page``), made from the same
source as unasync makes a sync library: each ``async def`` read as a ``def``, each ``await x`` as ``x``, and
``playwright.async_api`` as ``playwright.sync_api``. A step is written once; a traceback points into ``steps.py``."""

from __future__ import annotations

import ast
import inspect

from page_driving import steps


class Unasync(ast.NodeTransformer):
    """Async Playwright code read as the same code in Playwright's sync API."""

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.FunctionDef:
        self.generic_visit(node)
        return ast.copy_location(ast.FunctionDef(**{field: getattr(node, field) for field in node._fields}), node)

    def visit_Await(self, node: ast.Await) -> ast.AST:
        return self.visit(node.value)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.ImportFrom:
        if node.module == "playwright.async_api":
            node.module = "playwright.sync_api"
        return node


def unasynced(module) -> ast.Module:
    """``module``'s source read as sync code, its docstring left out (this module keeps its own)."""
    tree = Unasync().visit(ast.parse(inspect.getsource(module)))
    if ast.get_docstring(tree) is not None:
        tree.body = tree.body[1:]
    return ast.fix_missing_locations(tree)


exec(compile(unasynced(steps), inspect.getsourcefile(steps), "exec"), globals())  # noqa: S102 - our own source
