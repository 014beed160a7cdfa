"""Numbers typed into a request are read in ASCII digits only, through annotations.text.ascii_numbers: a superscript
("²"), another script's digits ("٣", "３") or thousands of digits get the page's own refusal, never a 500."""

import pytest

from annotations.models import Adjudication
from annotations.text.ascii_numbers import ascii_decimal, ascii_int
from tests.annotations.adjudication.test_adjudication_views import client_for, disputed, first_dispute, post  # noqa: F401

pytestmark = pytest.mark.django_db

NOT_NUMBERS = ["²", "٣", "３", "1²", " ", "", "-", "1e3", "0x10", "1_000", "+1", "9" * 5000]


@pytest.mark.parametrize("text", NOT_NUMBERS)
def test_ascii_int_refuses_what_is_not_ascii_digits(text: str) -> None:
    assert ascii_int(text) is None


def test_ascii_int_reads_ascii_digits_within_the_bound() -> None:
    assert ascii_int(" 42 ") == 42
    assert ascii_int("9" * 18) == int("9" * 18)
    assert ascii_int("9" * 19) is None
    assert ascii_int("-3") is None and ascii_int("-3", signed=True) == -3
    assert ascii_int(7) is None  # text only: a caller with a number has no parsing to do


@pytest.mark.parametrize("text", [*NOT_NUMBERS, "nan", "inf", "1.2.3", "١.٥"])
def test_ascii_decimal_refuses_what_is_not_an_ascii_decimal(text: str) -> None:
    assert ascii_decimal(text) is None


def test_ascii_decimal_reads_plain_decimals() -> None:
    assert ascii_decimal("2") == 2.0 and ascii_decimal("-0.5") == -0.5 and ascii_decimal(".25") == 0.25


@pytest.mark.parametrize("preference", ["²", "٣", "9" * 5000, "abc"])
def test_settling_a_dispute_with_an_unreadable_preference_is_no_500(disputed, adjudicator, preference):  # type: ignore[no-untyped-def]  # noqa: F811
    """The settle view read the preference with isdigit() and int(): "²" passes the first and fails the second."""
    from django.urls import reverse

    dispute = first_dispute()
    data = {f"v-{e['response_id']}-{e['aspect_id']}": "2" for e in dispute.spreads}
    data |= {"reason": "settled", "preference": preference}
    response = post(client_for(adjudicator), reverse("adjudication-resolve", args=[dispute.pk]), data)
    # This dispute is a spread of values, not a preference split, so the preference is not asked and is ignored.
    assert response.status_code == 303
    assert Adjudication.objects.filter(dispute=dispute).count() == 2
