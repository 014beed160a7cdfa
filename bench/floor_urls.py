"""The product's URLs plus the annotate benchmark's floor view (bench.floor_view); used as ROOT_URLCONF only when
EVALSITE_BENCH_FLOOR is set outside production (evalsite.settings)."""

from django.urls import path

from bench.floor_view import floor_submit
from evalsite.urls import handler403, handler404, handler500
from evalsite.urls import urlpatterns as product_urlpatterns

__all__ = ["handler403", "handler404", "handler500", "urlpatterns"]

urlpatterns = [
    path("bench-floor/campaigns/<int:campaign_id>/submit/", floor_submit, name="bench-floor-submit"),
    *product_urlpatterns,
]
