from tests.security.conftest import _fact_provider_server, fast_password_hashing, fresh_cache, full_world

__all__ = ["_fact_provider_server", "fast_password_hashing", "fresh_cache", "full_world"]
