import getpass

from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from annotations.roles import RESEARCHERS_GROUP, researcher_grant


class Command(BaseCommand):
    help = (
        f"Make an account a researcher (staff, in the {RESEARCHERS_GROUP!r} group): it may import datasets, open "
        "campaigns and launch judges, and sees only its own and shared datasets. Creates the account if needed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--no-password", action="store_true", help="for an existing account: keep its password, ask for none"
        )

    def handle(self, *args: object, **options: object) -> None:
        username = str(options["username"]).strip()
        if not username:
            raise CommandError("the username is empty")
        with transaction.atomic():
            user, created = User.objects.get_or_create(username=username, defaults={"email": str(options["email"])})
            if created or not options["no_password"]:
                password = getpass.getpass(f"Password for {username}: ")
                try:
                    validate_password(password, user)
                except ValidationError as exc:
                    raise CommandError("; ".join(exc.messages)) from None
                user.set_password(password)
                user.save()
            researcher_grant(user=user)
        self.stdout.write(f"{username} is a researcher{' (new account)' if created else ''}")
