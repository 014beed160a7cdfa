"""The error pages (403, 404, 405, 500) in the site's layout: what happened in a sentence and a way back.

They never show the exception's message: it can name an object the visitor may not know exists."""

from django.http import HttpRequest, HttpResponse, HttpResponseServerError
from django.shortcuts import render
from django.template import loader
from django.urls import reverse

# Routes whose 403 means "this task is not (or no longer) yours": the campaign page is the useful way back.
_TASK_ROUTES = frozenset({"annotate-task", "annotate-submit", "annotate-skip"})


def _campaign_url(request: HttpRequest) -> str:
    match = request.resolver_match
    if match is not None and match.url_name in _TASK_ROUTES and "campaign_id" in match.kwargs:
        return reverse("annotate-campaign", args=[match.kwargs["campaign_id"]])
    return ""


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return render(request, "403.html", {"campaign_url": _campaign_url(request)}, status=403)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    # The reason names Django's internal check (missing cookie, bad origin...): useful in logs, not to the visitor.
    return render(request, "403_csrf.html", status=403)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return render(request, "404.html", status=404)


def method_not_allowed(request: HttpRequest) -> HttpResponse:
    return render(request, "405.html", status=405)


def server_error(request: HttpRequest) -> HttpResponse:
    # No request context: whatever failed (the session, the database, a context processor) may fail again.
    return HttpResponseServerError(loader.get_template("500.html").render())
