"""Every URL pattern of the project, with a concrete path that resolves to it.

Walks django.urls.get_resolver() (so a view added tomorrow is covered without editing a list), and turns each route
into a sample path: route converters get a sample value, regex routes get a shortest matching string. Callers may
pass their own values per parameter name (a real dataset id, say) to reach past a 404.
"""

import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.exceptions import Resolver404
from django.urls.resolvers import RegexPattern, RoutePattern

try:  # Python 3.11+ keeps the regex parser private
    from re import _constants as sre_constants  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

SAMPLE_BY_CONVERTER = {
    "int": "1",
    "str": "x",
    "slug": "x",
    "path": "x",
    "uuid": str(uuid.UUID(int=1)),
}
_REPEATS = {
    op
    for op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, getattr(sre_constants, "POSSESSIVE_REPEAT", None))
    if op is not None
}
_ROUTE_PARAM = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>[^>]+)>")


@dataclass(frozen=True)
class Endpoint:
    route: str  # the pattern text, for messages
    name: str | None  # "namespace:name" when named
    callback: Callable[..., Any]
    path: str  # a concrete path that resolves to callback
    chain: tuple[Any, ...] = ()  # the pattern objects from the root, to build paths with other values

    @property
    def view_name(self) -> str:
        return f"{self.callback.__module__}.{getattr(self.callback, '__qualname__', self.callback)}"

    @property
    def parameters(self) -> list[str]:
        names: list[str] = []
        for pattern in self.chain:
            if isinstance(pattern, RoutePattern):
                names.extend(match["name"] for match in _ROUTE_PARAM.finditer(str(pattern)))
            else:
                names.extend(pattern.regex.groupindex)
        return names

    def path_with(self, params: Mapping[str, str]) -> str | None:
        """This endpoint's path with the given parameter values, or None if it would resolve elsewhere."""
        path = "/" + "".join(_sample(pattern, params) for pattern in self.chain).lstrip("/")
        try:
            match = resolve(path)
        except Resolver404:
            return None
        return path if match.func is self.callback else None


def _sample_regex(pattern: str, params: Mapping[str, str]) -> str:
    parsed = sre_parse.parse(pattern)
    names = {index: name for name, index in parsed.state.groupdict.items()}
    return _sample_tokens(list(parsed), names, params)


def _sample_tokens(tokens: list[tuple[Any, Any]], names: dict[int, str], params: Mapping[str, str]) -> str:
    out = []
    for op, arg in tokens:
        if op is sre_constants.LITERAL:
            out.append(chr(arg))
        elif op is sre_constants.SUBPATTERN:
            group, _, _, sub = arg
            if group in names and names[group] in params:
                out.append(params[names[group]])
            else:
                out.append(_sample_tokens(list(sub), names, params))
        elif op in _REPEATS:
            low, _, sub = arg
            out.append(_sample_tokens(list(sub), names, params) * low)
        elif op is sre_constants.BRANCH:
            out.append(_sample_tokens(list(arg[1][0]), names, params))
        elif op is sre_constants.IN:
            out.append(_sample_class(arg))
        elif op is sre_constants.ANY:
            out.append("x")
        elif op is sre_constants.CATEGORY:
            out.append("1" if arg is sre_constants.CATEGORY_DIGIT else "x")
        elif op is sre_constants.NOT_LITERAL:
            out.append("x" if arg != ord("x") else "y")
    return "".join(out)


def _sample_class(items: list[tuple[Any, Any]]) -> str:
    negate = any(op is sre_constants.NEGATE for op, _ in items)
    if negate:
        excluded = {chr(arg) for op, arg in items if op is sre_constants.LITERAL}
        return next(c for c in "x1y" if c not in excluded)
    for op, arg in items:
        if op is sre_constants.LITERAL:
            return chr(arg)
        if op is sre_constants.RANGE:
            low, high = arg
            return "1" if low <= ord("1") <= high else chr(low)
        if op is sre_constants.CATEGORY:
            return "1" if arg is sre_constants.CATEGORY_DIGIT else "x"
    return "x"


def _sample_route(route: str, params: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        return params.get(name, SAMPLE_BY_CONVERTER.get(match["converter"] or "str", "x"))

    return _ROUTE_PARAM.sub(replace, route)


def _sample(pattern: Any, params: Mapping[str, str]) -> str:
    if isinstance(pattern, RoutePattern):
        return _sample_route(str(pattern), params)
    if isinstance(pattern, RegexPattern):
        return _sample_regex(pattern.regex.pattern, params)
    return _sample_regex(pattern.regex.pattern, params)  # LocalePrefixPattern and friends


def iter_endpoints(params: Mapping[str, str] | None = None) -> Iterator[Endpoint]:
    """Every leaf pattern once, with a sample path that resolves to that very pattern's view."""
    params = params or {}
    seen: set[str] = set()

    def walk(resolver: URLResolver, chain: tuple[Any, ...], namespace: str) -> Iterator[Endpoint]:
        for entry in resolver.url_patterns:
            here = (*chain, entry.pattern)
            if isinstance(entry, URLResolver):
                child_ns = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
                yield from walk(entry, here, child_ns)
            elif isinstance(entry, URLPattern):
                route = "".join(str(pattern) for pattern in here)
                if route in seen:
                    continue
                name = f"{namespace}{entry.name}" if entry.name else None
                endpoint = Endpoint(route=route, name=name, callback=entry.callback, path="", chain=here)
                path = endpoint.path_with(params)
                if path is None:
                    continue  # an earlier pattern shadows every sample path of this one
                seen.add(route)
                yield Endpoint(route=route, name=name, callback=entry.callback, path=path, chain=here)

    yield from walk(get_resolver(), (), "")
