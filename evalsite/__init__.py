"""The project package.

The Celery app (`evalsite.celery`) is not imported here: a process that never sends or runs a task (a management
command, a page view) should not pay for loading Celery. `celery -A evalsite` finds it as `evalsite.celery:app`, and
the code that enqueues imports it where it sends (`judging.enqueue`)."""
