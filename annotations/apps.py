from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate, pre_save
from django.utils.translation import gettext_lazy as _


class AnnotationsConfig(AppConfig):
    name = "annotations"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = _("Annotations")

    def ready(self) -> None:
        from annotations.api.tokens import revoke_tokens_on_password_change  # noqa: PLC0415 - it imports models
        from annotations.roles import RESEARCH_APPS, researchers_group_sync  # noqa: PLC0415 - it imports models

        pre_save.connect(revoke_tokens_on_password_change, sender="auth.User", dispatch_uid="revoke-tokens-on-password")
        # Once per migrate (and per test flush), after the last research app: only then do all its permissions exist.
        last_research_app = apps.get_app_config(RESEARCH_APPS[-1])
        post_migrate.connect(researchers_group_sync, sender=last_research_app, dispatch_uid="researchers-group")
