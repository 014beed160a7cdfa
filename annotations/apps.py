from django.apps import AppConfig
from django.db.models.signals import post_migrate, pre_save


class AnnotationsConfig(AppConfig):
    name = "annotations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from annotations.roles import researchers_group_sync  # noqa: PLC0415 - it imports models
        from annotations.tokens import revoke_tokens_on_password_change  # noqa: PLC0415 - it imports models

        pre_save.connect(revoke_tokens_on_password_change, sender="auth.User", dispatch_uid="revoke-tokens-on-password")
        # Every app's post_migrate, not only this one's: judging's permissions exist only after judging migrated.
        post_migrate.connect(researchers_group_sync, dispatch_uid="researchers-group")
