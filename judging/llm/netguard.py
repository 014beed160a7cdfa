"""Where judge requests may go.

A researcher types `api_base` and the worker then sends a provider key there, so both the saved
config and every actual connection are checked: the host must resolve only to public addresses,
unless the operator's `JUDGE_API_BASE_ALLOWLIST` (hostnames, IPs or CIDR networks) names it.
Redirects are never followed (the gateway's HTTP client has them off), so a public host cannot
bounce a request, key included, to an internal one.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Iterable
from urllib.parse import urlsplit

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud metadata endpoints, refused even though some are not "private" by ipaddress's definition.
_METADATA_ADDRESSES = {
    ipaddress.ip_address("169.254.169.254"),
    ipaddress.ip_address("169.254.170.2"),
    ipaddress.ip_address("100.100.100.200"),
    ipaddress.ip_address("fd00:ec2::254"),
}
_METADATA_HOSTS = {"metadata.google.internal", "metadata", "instance-data"}


class ApiBaseRefused(ValueError):
    """The api_base (or a connection target) is not allowed."""


class HostUnresolvable(ApiBaseRefused):
    """The name did not resolve. Refused when a config is saved, but at call time it is a network failure (DNS down,
    no route), not a verdict on the address, so the gateway retries it like any connection error."""


def _allowlist() -> list[str]:
    raw = settings.JUDGE_API_BASE_ALLOWLIST
    if isinstance(raw, str):
        raw = [part for part in raw.replace(",", " ").split() if part]
    return [str(entry).strip().lower() for entry in raw if str(entry).strip()]


def _allowed_by_list(host: str, addresses: Iterable[IPAddress]) -> bool:
    entries = _allowlist()
    if host.lower() in entries:
        return True
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            continue
    addresses = list(addresses)
    return bool(addresses) and all(any(addr in net for net in networks) for addr in addresses)


def _is_public(addr: IPAddress) -> bool:
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    # A 6to4 address (2002::/16) is routed to the IPv4 address inside it, which Python still calls global.
    if isinstance(addr, ipaddress.IPv6Address) and addr.sixtofour is not None and not _is_public(addr.sixtofour):
        return False
    if addr in _METADATA_ADDRESSES:
        return False
    return not (
        addr.is_private
        or addr.is_loopback
        or addr.is_link_local
        or addr.is_multicast
        or addr.is_reserved
        or addr.is_unspecified
        or (isinstance(addr, ipaddress.IPv4Address) and addr in ipaddress.ip_network("100.64.0.0/10"))
    )


_RESOLVE_CACHE: dict[tuple[str, int], tuple[float, list[IPAddress]]] = {}
_RESOLVE_TTL_S = 30.0


def resolve(host: str, port: int) -> list[IPAddress]:
    now = time.monotonic()
    cached = _RESOLVE_CACHE.get((host, port))
    if cached and now - cached[0] < _RESOLVE_TTL_S:
        return cached[1]
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise HostUnresolvable(f"cannot resolve host {host!r}") from exc
    addresses = []
    for info in infos:
        try:
            addresses.append(ipaddress.ip_address(str(info[4][0]).split("%")[0]))
        except ValueError:
            continue
    _RESOLVE_CACHE[(host, port)] = (now, addresses)
    return addresses


def check_host(host: str, port: int) -> None:
    host = host.strip("[]").lower()
    if not host:
        raise ApiBaseRefused("api_base has no host")
    if host in _METADATA_HOSTS:
        if _allowed_by_list(host, []):
            return
        raise ApiBaseRefused(f"host {host!r} is a cloud metadata endpoint")
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    check_addresses(host, [literal] if literal is not None else resolve(host, port))


def check_addresses(host: str, addresses: list[IPAddress]) -> None:
    """The addresses a host resolved to, as the connection will use them."""
    if not addresses:
        raise ApiBaseRefused(f"host {host!r} resolves to no address")
    if _allowed_by_list(host, addresses):
        return
    refused = [str(a) for a in addresses if not _is_public(a)]
    if refused:
        raise ApiBaseRefused(
            f"host {host!r} resolves to a private, loopback, link-local or metadata address "
            f"({', '.join(refused)}); an operator can allow it with JUDGE_API_BASE_ALLOWLIST"
        )


def validate_api_base(url: str) -> str:
    """Check an api_base when a config is saved; returns it without a trailing slash."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise ApiBaseRefused("api_base must be an http(s) URL")
    if parts.username or parts.password:
        raise ApiBaseRefused("api_base must not contain credentials")
    if parts.query or parts.fragment:
        raise ApiBaseRefused("api_base must not have a query or fragment")
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    check_host(host, port)
    return url.strip().rstrip("/")
