from django.urls import path

from judging.analysis import api as dashboard_api

urlpatterns = [
    path("datasets/<int:pk>/agreement/", dashboard_api.agreement_view, name="api-stats-agreement"),
    path("datasets/<int:pk>/correlation/", dashboard_api.correlation_view, name="api-stats-correlation"),
    path("datasets/<int:pk>/compare-judges/", dashboard_api.compare_judges_view, name="api-stats-compare-judges"),
    path("plan/", dashboard_api.plan_view, name="api-stats-plan"),
    path("datasets/<int:pk>/alt-test/", dashboard_api.alt_test_view, name="api-stats-alt-test"),
    path("datasets/<int:pk>/ranking/", dashboard_api.ranking_view, name="api-stats-ranking"),
    path("datasets/<int:pk>/ppi/", dashboard_api.ppi_view, name="api-stats-ppi"),
]
