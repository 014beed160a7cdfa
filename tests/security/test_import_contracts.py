"""Every module and sub-package of annotations/ and judging/ sits in a layer of an import contract.

`lint-imports` checks only the modules a contract names: a package left out of every layer contract can import
anything, in any direction, and the build stays green. This test reads the contracts in pyproject.toml and fails when
a package holds a child (a module or a sub-package) that no layers contract places. Django's by-name packages are the
exception: `migrations`, `templatetags` and `management.commands` hold modules Django loads by name, which nothing in
the project imports; the packages themselves are placed like any other.
"""

import re
import tomllib
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
APPS = ("annotations", "judging")
LOADED_BY_NAME = ("migrations", "templatetags", "commands")


def layered_modules(contracts: list[dict]) -> set[str]:
    """The modules the layers contracts place, each container's layers expanded to full names."""
    named: set[str] = set()
    for contract in contracts:
        if contract.get("type") != "layers":
            continue
        containers = contract.get("containers") or [""]
        for layer in contract["layers"]:
            for part in re.split(r"[:|]", layer):
                name = part.strip().strip("()").strip()
                if name:
                    named.update(f"{container}.{name}" if container else name for container in containers)
    return named


def package_children(root: Path = PROJECT_ROOT) -> dict[str, list[str]]:
    """Each package of the apps (Django's by-name packages left out) with its modules and sub-packages."""
    found: dict[str, list[str]] = {}
    for app in APPS:
        for init in sorted((root / app).rglob("__init__.py")):
            directory = init.parent
            parts = directory.relative_to(root).parts
            if "__pycache__" in parts or parts[-1] in LOADED_BY_NAME or "migrations" in parts:
                continue
            package = ".".join(parts)
            children = [f"{package}.{path.stem}" for path in sorted(directory.glob("*.py")) if path.stem != "__init__"]
            children += [
                f"{package}.{path.name}"
                for path in sorted(directory.iterdir())
                if (path / "__init__.py").is_file() and path.name != "migrations"
            ]
            found[package] = sorted(children)
    return found


def unplaced(children: dict[str, list[str]], named: set[str]) -> list[str]:
    return [child for kids in children.values() for child in kids if child not in named]


def test_every_module_and_package_of_the_apps_is_in_a_layer() -> None:
    config = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    named = layered_modules(config["tool"]["importlinter"]["contracts"])
    children = package_children()
    assert {"annotations", "annotations.gold", "judging", "judging.factscore"} <= set(children)
    assert unplaced(children, named) == []


def test_a_module_outside_every_layer_is_caught(tmp_path: Path) -> None:
    packages = ("judging", "judging/engine", "judging/migrations", "judging/management", "judging/management/commands")
    for package in packages:
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    modules = ("judging/models.py", "judging/engine/units.py", "judging/engine/extra.py", "judging/migrations/0001.py")
    for module in modules:
        (tmp_path / module).write_text("")
    (tmp_path / "judging" / "management" / "commands" / "judge.py").write_text("")
    contracts = [
        {"type": "layers", "layers": ["judging.engine", "judging.models | judging.management"]},
        {"type": "layers", "containers": ["judging.engine", "judging.management"], "layers": ["(units)", "(commands)"]},
        {"type": "forbidden", "source_modules": ["judging.engine.extra"], "forbidden_modules": ["django"]},
    ]
    named = layered_modules(contracts)
    assert {"judging.engine.units", "judging.management.commands", "judging.models", "judging.management"} <= named
    children = package_children(tmp_path)
    assert set(children) == {"judging", "judging.engine", "judging.management"}
    assert unplaced(children, named) == ["judging.engine.extra"]
