"""Opaque references: database ids shown to annotators as values that carry neither the id nor the order rows were
created in.

A task's id says when it was created, and tasks are created in the order of the dataset's file, where gold items
usually come last; a slot's id says the same of slots. An annotator who could read either could tell gold tasks
from the others. So every id an annotator sees (in an address, a hidden form field or an API document) passes
through a keyed permutation of 64-bit numbers, a four-round Feistel network whose round function is HMAC-SHA256
under a key derived from SECRET_KEY and the kind of reference (Luby and Rackoff's construction of a pseudorandom
permutation). The mapping is fixed for a deployment, so the same task keeps the same address, and different kinds
use different keys, so a slot's reference cannot be matched with its task's.
"""

import base64
import functools
import hashlib
import hmac

from django.conf import settings
from django.urls import register_converter

ROUNDS = 4
_HALF = 0xFFFFFFFF
_WIDTH = 13  # base32 characters of 64 bits


@functools.cache
def _round_keys(kind: str, secret: str) -> tuple[bytes, ...]:
    base = hashlib.sha256(f"evalsite.opaque:{kind}:{secret}".encode()).digest()
    return tuple(hmac.new(base, bytes([i]), hashlib.sha256).digest() for i in range(ROUNDS))


def _round(key: bytes, half: int) -> int:
    return int.from_bytes(hmac.new(key, half.to_bytes(4, "big"), hashlib.sha256).digest()[:4], "big")


def _permute(kind: str, value: int, *, inverse: bool) -> int:
    keys = _round_keys(kind, settings.SECRET_KEY)
    left, right = value >> 32, value & _HALF
    if not inverse:
        for key in keys:
            left, right = right, left ^ _round(key, right)
    else:
        for key in reversed(keys):
            left, right = right ^ _round(key, left), left
    return (left << 32) | right


def is_row_key(pk: int) -> bool:
    """Whether `pk` can be the id of a row: the tables' keys are positive 64-bit integers, and SQLite refuses to bind
    a larger one."""
    return 0 < pk < 2**63


def opaque_ref(kind: str, pk: int) -> str:
    """The reference an annotator sees for row `pk` of the given kind ("task", "slot")."""
    if not is_row_key(pk):
        raise ValueError("not a row id")
    number = _permute(kind, pk, inverse=False)
    return base64.b32encode(number.to_bytes(8, "big")).decode().rstrip("=").lower()


def opaque_pk(kind: str, ref: str) -> int | None:
    """The row id behind a reference, or None when the text is not a reference of this kind."""
    if not isinstance(ref, str) or len(ref) != _WIDTH or not ref.isascii() or not ref.isalnum():
        return None
    try:
        raw = base64.b32decode(ref.upper() + "===", casefold=False)
    except ValueError:
        return None
    if len(raw) != 8:
        return None
    pk = _permute(kind, int.from_bytes(raw, "big"), inverse=True)
    if not is_row_key(pk) or opaque_ref(kind, pk) != ref:
        return None
    return pk


class TaskRefConverter:
    """The `<taskref:task_id>` path segment: a task's opaque reference in the address, its id in the view.
    reverse() takes the id (or a reference already made, as an API client sends it back)."""

    regex = "[a-z2-7]{13}"

    def to_python(self, value: str) -> int:
        pk = opaque_pk("task", value)
        if pk is None:
            raise ValueError("not a task reference")
        return pk

    def to_url(self, value: int | str) -> str:
        if isinstance(value, str) and not value.isdigit():
            if opaque_pk("task", value) is None:
                raise ValueError("not a task reference")
            return value
        return opaque_ref("task", int(value))


# Registered once, here, for every URL module that names <taskref:…> (they import this module).
register_converter(TaskRefConverter, "taskref")
