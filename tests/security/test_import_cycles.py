"""No import cycles between our modules, counting imports made inside functions.

A function-local import hides a cycle from Python's start-up but not from the design: both modules still
depend on each other. import-linter's contracts (pyproject.toml) state which way packages may depend; this
test catches a cycle anywhere, including between two modules of the same layer.
"""

import textwrap
from pathlib import Path

import grimp
import pytest

OUR_PACKAGES = ("annotations", "judging", "evalsite")


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return sorted(cycles)


def test_our_modules_import_each_other_without_cycles() -> None:
    graph = grimp.build_graph(*OUR_PACKAGES, cache_dir=None)
    assert import_cycles(graph) == []


@pytest.fixture
def cyclic_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    package = tmp_path / "cyclepkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "alpha.py").write_text("from cyclepkg import beta\n")
    # The way back is hidden inside a function, as the services used to import the tasks.
    (package / "beta.py").write_text(
        textwrap.dedent(
            """
            def enqueue():
                from cyclepkg import alpha

                return alpha
            """
        )
    )
    (package / "gamma.py").write_text("from cyclepkg import alpha\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "cyclepkg"


def test_a_cycle_through_a_function_local_import_is_found(cyclic_package: str) -> None:
    graph = grimp.build_graph(cyclic_package, cache_dir=None)
    assert import_cycles(graph) == [["cyclepkg.alpha", "cyclepkg.beta"]]
