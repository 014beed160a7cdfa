"""User names as the login form reads them. Django's login form normalises what is typed with NFKC (so "ａｎｎ01"
signs in as "ann01"), and a name stored in another form can never sign in; every place that names a new account
or compares names asks here."""

import unicodedata

from django.contrib.auth.models import AbstractBaseUser


def username_normalized(username: str) -> str:
    """The name as the login form sends it to the database: stripped, then NFKC (Django's normalize_username)."""
    return str(AbstractBaseUser.normalize_username(username.strip()))


def username_key(username: str) -> str:
    """The username as the login form authenticates it (NFKC, stripped) and case-folded; folding can leave text
    that NFKC changes again, hence the second pass."""
    folded = unicodedata.normalize("NFKC", username).strip().casefold()
    return unicodedata.normalize("NFKC", folded)
