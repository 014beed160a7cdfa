from tests.annotate.conftest import english_by_default  # noqa: F401 - services tests here expect English too
