"""No cycles between packages in annotations/ and judging/, counting imports made inside functions.

Within every package, the things that sit side by side in it (its modules and its sub-packages, each sub-package
taken with everything below it) never depend on each other in a circle: that is what lets a reader learn
`judging.factscore` without `judging.engine`, or `judging.methods` without `judging.factscore`. This is
import-linter's acyclic-siblings rule (the contract of that name in pyproject.toml runs it too); this test also
states the one reviewed exception and checks that it still exists, and that the two apps point one way: judging
builds on annotations, annotations never imports judging.

The exception: an app's `models` module imports its sub-packages' models (`from ...models import *` at its end),
because Django looks for an app's models there, while those models point back at the app's models (their foreign
keys). Without that registration there is no cycle: the test removes exactly those imports and nothing else.
"""

from pathlib import Path

import grimp
import pytest

APPS = ("annotations", "judging")
MODEL_REGISTRATIONS = (
    ("annotations.models", "annotations.gold.models"),
    ("annotations.models", "annotations.quality.models"),
    ("annotations.models", "annotations.recruitment.models"),
    ("annotations.models", "annotations.research.models"),
    ("annotations.models", "annotations.adjudication.models"),
    ("judging.models", "judging.factscore.models"),
)


def package_cycle_breakers(graph: grimp.ImportGraph, roots: tuple[str, ...]) -> dict[str, list[tuple[str, str]]]:
    """Per package under `roots` with a cycle among its children: imports whose removal would break the cycles."""
    packages = [
        module
        for module in sorted(graph.modules)
        if module.split(".")[0] in roots and graph.find_children(module) and ".migrations" not in f"{module}."
    ]
    found = {package: sorted(graph.nominate_cycle_breakers(package)) for package in packages}
    return {package: breakers for package, breakers in found.items() if breakers}


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*APPS, cache_dir=None)


def test_the_reviewed_model_registrations_exist(graph: grimp.ImportGraph) -> None:
    for importer, imported in MODEL_REGISTRATIONS:
        assert graph.direct_import_exists(importer=importer, imported=imported), (importer, imported)


def test_no_package_of_the_apps_has_a_cycle(graph: grimp.ImportGraph) -> None:
    for importer, imported in MODEL_REGISTRATIONS:
        graph.remove_import(importer=importer, imported=imported)
    assert package_cycle_breakers(graph, APPS) == {}


def test_annotations_never_imports_judging(graph: grimp.ImportGraph) -> None:
    imports = graph.find_matching_direct_imports(import_expression="annotations.** -> judging.**")
    assert sorted((i["importer"], i["imported"]) for i in imports) == []
    assert graph.find_shortest_chain(importer="annotations", imported="judging") is None


@pytest.fixture
def package_with_a_sibling_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """engine and plugins import each other only through modules deep inside them, one import inside a function:
    no module cycle, but a package cycle."""
    root = tmp_path / "siblingpkg"
    for package in (root, root / "engine", root / "plugins"):
        package.mkdir()
        (package / "__init__.py").write_text("")
    (root / "engine" / "runner.py").write_text("from siblingpkg.plugins import fancy\n")
    (root / "plugins" / "fancy.py").write_text(
        "def run():\n    from siblingpkg.engine import base\n\n    return base\n"
    )
    (root / "engine" / "base.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "siblingpkg"


def test_a_package_cycle_without_a_module_cycle_is_found(package_with_a_sibling_cycle: str) -> None:
    graph = grimp.build_graph(package_with_a_sibling_cycle, cache_dir=None)
    breakers = package_cycle_breakers(graph, (package_with_a_sibling_cycle,))
    assert list(breakers) == ["siblingpkg"]
    assert len(breakers["siblingpkg"]) == 1
    assert breakers["siblingpkg"][0] in {
        ("siblingpkg.engine.runner", "siblingpkg.plugins.fancy"),
        ("siblingpkg.plugins.fancy", "siblingpkg.engine.base"),
    }
