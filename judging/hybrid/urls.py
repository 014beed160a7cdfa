from django.urls import path

from judging.hybrid import views

urlpatterns = [
    path("campaigns/<int:campaign_id>/hybrid/", views.hybrid_page, name="research-campaign-hybrid"),
    path(
        "campaigns/<int:campaign_id>/hybrid/calibrate/",
        views.hybrid_calibrate_view,
        name="research-campaign-hybrid-calibrate",
    ),
    path(
        "campaigns/<int:campaign_id>/hybrid/sampling/",
        views.hybrid_sampling_view,
        name="research-campaign-hybrid-sampling",
    ),
    path(
        "campaigns/<int:campaign_id>/hybrid/<int:calibration_id>/apply/",
        views.hybrid_apply_view,
        name="research-campaign-hybrid-apply",
    ),
]
