"""A URLconf with deliberately broken views, used to show that the sweeps catch what they claim to catch."""

from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt


def changes_state(request: HttpRequest) -> HttpResponse:
    User.objects.create_user(username=f"made-by-{request.method}-{User.objects.count()}")
    return HttpResponse("changed")


urlpatterns = [
    path("exempt/", csrf_exempt(changes_state), name="exempt"),
    path("plain/", changes_state, name="plain"),
]
