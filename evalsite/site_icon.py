"""/favicon.ico for clients that ask the conventional address instead of reading the page's icon link: a redirect
to the static icon. Public like every static file, and read-only."""

from django.http import HttpRequest, HttpResponseRedirect
from django.templatetags.static import static
from django.views.decorators.http import require_safe


@require_safe
def favicon(request: HttpRequest) -> HttpResponseRedirect:
    # Resolved per request: the hashed name exists only once the static files are collected.
    return HttpResponseRedirect(static("favicon.svg"))
