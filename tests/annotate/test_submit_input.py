"""The submit body is read directly when it is well formed; that shortcut must agree with SubmitInput exactly."""

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rest_framework.exceptions import ValidationError

from annotations.api.annotator import SubmitInput, _well_formed_submit, submit_input

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=1200),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["NA", "3", "", " 2 "]),
    st.text(max_size=6),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
keys = st.one_of(
    st.from_regex(r"[A-Za-z0-9_-]{8,64}", fullmatch=True),
    st.sampled_from([" abcdefgh ", "abcdefgh\n", "short", "x" * 65, "with space 1", ""]),
    st.text(max_size=70),
    st.integers(),
    st.none(),
)
by_aspect = st.dictionaries(st.sampled_from(["factuality", "amount_info", "x"]), scalars, max_size=3)
ratings = st.one_of(
    st.dictionaries(st.sampled_from(["1", "2", "10", "a", ""]), st.one_of(by_aspect, scalars), max_size=3),
    scalars,
)
texts = st.one_of(
    st.text(max_size=20),
    st.sampled_from([" padded\n", "   ", "x" * 10_000, " " + "x" * 10_000 + " ", "x" * 10_001, "a\x00b", "bad \ud800"]),
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
)
bodies = st.fixed_dictionaries(
    {},
    optional={
        "idempotency_key": keys,
        "ratings": ratings,
        "preference": st.one_of(
            st.none(), st.integers(min_value=-1, max_value=1001), st.sampled_from(["2", True, 2.0])
        ),
        "none_appropriate": st.one_of(st.booleans(), st.sampled_from(["true", 1, 0, None])),
        "rationale": texts,
        "comment": texts,
    },
)


def serializer_result(body: Any) -> dict[str, Any] | None:
    form = SubmitInput(data=body)
    return dict(form.validated_data) if form.is_valid() else None


WELL_FORMED = {
    "idempotency_key": "key-0001",
    "ratings": {"1": {"factuality": 2, "amount_info": "NA"}, "2": {"factuality": 1.5, "amount_info": True}},
    "preference": 2,
    "none_appropriate": False,
    "rationale": "  because  ",
}


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies)
@example(WELL_FORMED)
@example({"idempotency_key": "key-0001", "ratings": {}})
@example({"idempotency_key": "key-0001", "ratings": {"1": {}}})
@example({"idempotency_key": "key-0001", "ratings": {"1": {"factuality": None}}})
@example({"idempotency_key": "key-0001", "ratings": {}, "preference": None, "comment": "\u00e9 " * 3})
def test_the_shortcut_accepts_only_what_the_serializer_accepts_and_gives_the_same_data(body: dict) -> None:
    shortcut = _well_formed_submit(body)
    if shortcut is not None:
        assert serializer_result(body) == shortcut


def test_well_formed_bodies_take_the_shortcut() -> None:
    expected = serializer_result(WELL_FORMED)
    assert expected is not None and expected["rationale"] == "because"
    assert _well_formed_submit(WELL_FORMED) == expected
    assert submit_input(WELL_FORMED) == expected


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"ratings": {}}, {"idempotency_key"}),
        ({"idempotency_key": "key-0001", "ratings": {"1": {}}, "preference": 0}, {"ratings", "preference"}),
        ({"idempotency_key": "key-0001", "ratings": {}, "rationale": "x" * 10_001}, {"rationale"}),
        ({"idempotency_key": "key-0001", "ratings": {}, "none_appropriate": "maybe"}, {"none_appropriate"}),
    ],
)
def test_malformed_bodies_get_the_serializers_errors(body: dict, fields: set[str]) -> None:
    assert _well_formed_submit(body) is None
    with pytest.raises(ValidationError) as raised:
        submit_input(body)
    assert set(raised.value.detail) == fields  # type: ignore[arg-type]


def test_coercions_the_serializer_allows_still_work() -> None:
    body = {"idempotency_key": "key-0001", "ratings": {}, "preference": "2", "none_appropriate": "true"}
    assert _well_formed_submit(body) is None
    assert submit_input(body) == {
        "idempotency_key": "key-0001",
        "ratings": {},
        "preference": 2,
        "none_appropriate": True,
        "rationale": "",
        "comment": "",
    }
