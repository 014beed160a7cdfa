"""A researcher is a staff account in the Researchers group, which holds the research apps' permissions."""

from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from annotations.roles import RESEARCHERS_GROUP, researcher_grant

pytestmark = pytest.mark.django_db


def test_migrate_leaves_the_group_with_every_research_permission() -> None:
    group = Group.objects.get(name=RESEARCHERS_GROUP)
    expected = set(Permission.objects.filter(content_type__app_label__in=["annotations", "judging"]))
    assert expected and set(group.permissions.all()) >= expected
    assert not group.permissions.filter(content_type__app_label="auth").exists()


def test_a_granted_researcher_reaches_import_and_campaign_forms(outsider: User) -> None:
    client = Client()
    client.force_login(outsider)
    import_url = reverse("admin:annotations_dataset_import")
    assert client.get(import_url).status_code in {302, 403}
    researcher_grant(user=outsider)
    assert client.get(import_url).status_code == 200
    assert client.get(reverse("admin:annotations_campaign_add")).status_code == 200
    assert client.get(reverse("admin:judging_judgeconfig_add")).status_code == 200
    assert client.get(reverse("admin:auth_user_changelist")).status_code == 403


def test_create_researcher_makes_or_promotes_an_account(monkeypatch: Any, outsider: User) -> None:
    monkeypatch.setattr("getpass.getpass", lambda prompt="": "a long enough passphrase 42")
    call_command("create_researcher", "newcomer")
    newcomer = User.objects.get(username="newcomer")
    assert newcomer.is_staff and not newcomer.is_superuser
    assert newcomer.groups.filter(name=RESEARCHERS_GROUP).exists()
    assert newcomer.check_password("a long enough passphrase 42")

    before = outsider.password
    call_command("create_researcher", outsider.username, "--no-password")
    outsider.refresh_from_db()
    assert outsider.is_staff and outsider.password == before


def test_create_researcher_refuses_a_weak_password(monkeypatch: Any) -> None:
    monkeypatch.setattr("getpass.getpass", lambda prompt="": "123")
    with pytest.raises(CommandError, match=r"too short|too common|entirely numeric"):
        call_command("create_researcher", "weak")
    assert not User.objects.filter(username="weak").exists()
