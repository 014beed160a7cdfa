"""The addresses of a campaign's tasks, one shape for the web pages and the annotator API: the next task, a task by
its opaque reference, and its submit, skip and draft actions."""

from collections.abc import Callable
from typing import Any

from django.urls import URLPattern, path

from annotations.text import opaque  # noqa: F401  (registers the <taskref:…> path converter)

View = Callable[..., Any]


def task_routes(
    campaign: str, name: str, *, next_task: View, task: View, submit: View, skip: View, draft: View
) -> list[URLPattern]:
    """`campaign` is the campaign's address (with <int:campaign_id>); each route is named `name` and its action."""
    one_task = f"{campaign}tasks/<taskref:task_id>/"
    return [
        path(f"{campaign}next/", next_task, name=f"{name}-next"),
        path(one_task, task, name=f"{name}-task"),
        path(f"{one_task}submit/", submit, name=f"{name}-submit"),
        path(f"{one_task}skip/", skip, name=f"{name}-skip"),
        path(f"{one_task}draft/", draft, name=f"{name}-draft"),
    ]
