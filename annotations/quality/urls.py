from django.urls import path

from annotations.quality import views

urlpatterns = [
    path("campaigns/<int:campaign_id>/quality.csv", views.quality_csv, name="campaign-quality-csv"),
    path("campaigns/<int:campaign_id>/payments.csv", views.payment_csv, name="campaign-payment-csv"),
    path("campaigns/<int:campaign_id>/posterior-labels.csv", views.posterior_csv, name="campaign-posterior-labels-csv"),
]
