from django.apps import AppConfig
from django.db.models.signals import pre_save


class AnnotationsConfig(AppConfig):
    name = "annotations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from annotations.tokens import revoke_tokens_on_password_change  # noqa: PLC0415 - it imports models

        pre_save.connect(revoke_tokens_on_password_change, sender="auth.User", dispatch_uid="revoke-tokens-on-password")
