from django.apps import AppConfig


class JudgingConfig(AppConfig):
    name = "judging"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the Celery tasks in every process, not only in workers: services enqueue them by name.
        from judging import tasks  # noqa: F401, PLC0415
