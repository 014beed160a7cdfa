"""The site's URLs plus one view that fails, to see the 500 page through the whole middleware stack."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from evalsite.urls import handler403, handler404, handler500
from evalsite.urls import urlpatterns as site_urlpatterns

__all__ = ["handler403", "handler404", "handler500", "urlpatterns"]


def fail(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("secret-detail-of-the-failure")


urlpatterns = [path("test-only/fail/", fail), path("api/test-only/fail/", fail), *site_urlpatterns]
