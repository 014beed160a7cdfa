"""No known-vulnerable release of our dependencies is installed.

The check walks the installed distributions reachable from requirements-dev.txt, which includes the runtime's
requirements.txt (importlib.metadata, markers evaluated), and fails on a version below a patched floor or on a
release known to be malicious. Floors come from public advisories; raise them when a new advisory lands (the test
names the package and the reason).
"""

import re
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

PROJECT_ROOT = Path(__file__).resolve().parents[2]

# name -> (lowest safe version, why)
FLOORS: dict[str, tuple[str, str]] = {
    "django": ("5.2.8", "CVE-2025-64459 SQL injection via _connector in Q/filter kwargs; CVE-2025-64458 DoS"),
    "djangorestframework": ("3.15.2", "CVE-2024-21520 XSS in the browsable API (break_long_headers)"),
    "litellm": ("1.61.15", "SSRF through api_base (CVE-2024-6587) and later key-leak and injection fixes"),
    "jinja2": ("3.1.6", "CVE-2025-27516 sandbox escape through |attr"),
    "urllib3": ("2.5.0", "CVE-2025-50181 / CVE-2025-50182 redirects not disabled as configured"),
    "requests": ("2.32.4", "CVE-2024-47081 .netrc credentials leaked to other hosts"),
    "h11": ("0.16.0", "CVE-2025-43859 request smuggling through chunked bodies"),
    "idna": ("3.7", "CVE-2024-3651 quadratic-time decoding"),
    "certifi": ("2024.7.4", "removal of GLOBALTRUST roots"),
    "aiohttp": ("3.12.14", "CVE-2025-53643 request smuggling in the pure-Python parser"),
    "gunicorn": ("23.0.0", "CVE-2024-1135 / CVE-2024-6827 request smuggling"),
    "sqlparse": ("0.5.0", "CVE-2024-4340 recursion error on nested lists"),
    "celery": ("5.2.2", "CVE-2021-23727 command injection through stored exceptions"),
    "redis": ("4.5.4", "CVE-2023-28858 / CVE-2023-28859 responses sent to the wrong client on cancellation"),
    "pyyaml": ("5.4", "CVE-2020-14343 arbitrary code execution in full_load"),
    "lxml": ("4.9.1", "CVE-2022-2309 NULL dereference"),
    "pillow": ("10.3.0", "CVE-2024-28219 buffer overflow"),
    "tqdm": ("4.66.3", "CVE-2024-34062 eval of CLI arguments"),
    "nltk": ("3.9", "CVE-2024-39705 pickle loading in the downloader"),
    "scikit-learn": ("1.5.0", "CVE-2024-5206 sensitive data leak in TfidfVectorizer"),
    "zipp": ("3.19.1", "CVE-2024-5569 infinite loop"),
    "pydantic": ("2.4.0", "CVE-2024-3772 ReDoS in email validation"),
    "setuptools": ("78.1.1", "CVE-2025-47273 path traversal; CVE-2024-6345 code execution in package_index"),
    "anyio": ("4.4.0", "thread race crash in to_thread (GHSA-jg82-xh3w-rhxx)"),
}

# Releases that must never be installed, whatever the floor says.
BLOCKED: dict[str, dict[str, str]] = {
    "litellm": {
        "1.82.7": "compromised release on PyPI (credential-stealing code in the package)",
        "1.82.8": "compromised release on PyPI (credential-stealing code in the package)",
    },
}


def vulnerable(installed: dict[str, str]) -> list[str]:
    """Human-readable problems for a {name: version} map."""
    problems = []
    for raw_name, raw_version in sorted(installed.items()):
        name = canonicalize_name(raw_name)
        version = Version(raw_version)
        reason = BLOCKED.get(name, {}).get(str(version))
        if reason:
            problems.append(f"{name} {version} is blocked: {reason}")
        floor = FLOORS.get(name)
        if floor and version < Version(floor[0]):
            problems.append(f"{name} {version} is below {floor[0]}: {floor[1]}")
    return problems


def requirement_lines(path: Path = PROJECT_ROOT / "requirements-dev.txt") -> list[str]:
    """The requirement lines of a requirements file and of the files it includes with -r, comments removed."""
    lines = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            lines.extend(requirement_lines(path.parent / line[3:].strip()))
        elif line:
            lines.append(line)
    return lines


def test_dev_requirements_include_the_runtime() -> None:
    runtime = requirement_lines(PROJECT_ROOT / "requirements.txt")
    assert runtime and set(runtime) < set(requirement_lines())


def _requirement_names() -> list[str]:
    names = []
    for line in requirement_lines():
        if line.startswith("-"):
            continue
        try:
            names.append(Requirement(line).name)
        except InvalidRequirement:
            continue
    return names


def dependency_closure() -> dict[str, str]:
    """Installed {name: version} for requirements-dev.txt (runtime included) and everything they require (markers
    evaluated)."""
    environment = default_environment()
    seen: dict[str, str] = {}
    pending = [(name, frozenset[str]()) for name in _requirement_names()]
    while pending:
        name, extras = pending.pop()
        key = canonicalize_name(name)
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if key in seen and not extras:
            continue
        seen[key] = distribution.version
        for spec in distribution.requires or []:
            requirement = Requirement(spec)
            if requirement.marker is not None:
                wanted = ["", *sorted(extras)]
                if not any(requirement.marker.evaluate({**environment, "extra": extra}) for extra in wanted):
                    continue
            if canonicalize_name(requirement.name) not in seen:
                pending.append((requirement.name, frozenset(requirement.extras)))
    return seen


def test_no_installed_dependency_is_known_vulnerable() -> None:
    closure = dependency_closure()
    assert {"django", "litellm", "djangorestframework", "celery"} <= set(closure)
    assert vulnerable(closure) == []


def test_every_pinned_requirement_is_installed_at_its_pin() -> None:
    mismatched = []
    for line in requirement_lines():
        match = re.match(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s;#]+)", line)
        if not match:
            continue
        name = re.sub(r"\[.*\]", "", match.group(1))
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            mismatched.append(f"{name} not installed")
            continue
        if Version(installed) != Version(match.group(2)):
            mismatched.append(f"{name} {installed} installed, {match.group(2)} pinned")
    assert mismatched == []


@pytest.mark.parametrize(
    ("installed", "expected"),
    [
        ({"litellm": "1.82.7"}, "blocked"),
        ({"litellm": "1.82.8"}, "blocked"),
        ({"LiteLLM": "1.82.8"}, "blocked"),
        ({"litellm": "1.40.0"}, "below"),
        ({"Django": "5.2.0"}, "below"),
        ({"Django": "4.2.30"}, "below"),
        ({"djangorestframework": "3.15.1"}, "below"),
        ({"Jinja2": "3.1.5"}, "below"),
        ({"urllib3": "2.4.0"}, "below"),
    ],
)
def test_checker_flags_known_bad_releases(installed: dict[str, str], expected: str) -> None:
    problems = vulnerable(installed)
    assert len(problems) >= 1 and expected in problems[0]


def test_checker_passes_patched_releases() -> None:
    assert vulnerable({"litellm": "1.82.9", "Django": "5.2.8", "djangorestframework": "3.18.3"}) == []
