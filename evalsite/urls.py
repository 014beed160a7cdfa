from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from evalsite import auth, error_pages, help_pages, site_icon

handler403 = error_pages.permission_denied
handler404 = error_pages.page_not_found
handler500 = error_pages.server_error

urlpatterns = [
    path("favicon.ico", site_icon.favicon, name="favicon"),
    path("admin/login/", auth.admin_login_view),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth.login_view, name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("help/", help_pages.help_index, name="help-index"),
    path("help/<str:slug>/", help_pages.help_page, name="help-page"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/token/", auth.token_obtain, name="api-token"),
    path("api/token/mine/", auth.token_mine, name="api-token-mine"),
    path("api/datasets/", include("annotations.api.dataset_urls")),
    path("api/annotate/", include("annotations.api.annotator_urls")),
    path("api/stats/", include("judging.analysis.api_urls")),
    path("api/judging/", include("judging.api_urls")),
    path("dashboard/", include("judging.analysis.urls")),
    path("factscore/", include("judging.factscore.urls")),
    path("join/", include("annotations.recruitment.urls")),
    path("research/", include("annotations.research.urls")),
    path("research/", include("judging.hybrid.urls")),
    path("research/", include("judging.research.urls")),
    path("", include("annotations.urls")),
]
