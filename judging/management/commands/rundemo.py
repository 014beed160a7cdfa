import os
import secrets
import signal
import subprocess
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from annotations.campaigns.setup import campaign_create
from annotations.datasets.importing import dataset_import
from annotations.models import Campaign, Dataset
from annotations.roles import researcher_grant
from judging.management.worker import worker_command
from judging.models import JudgeRun
from judging.services import judge_config_create, judge_run_launch

# The demo runs a judge on an annotations dataset, so it is a command of the judging app, which may use both apps.
SAMPLE_DIR = Path(__file__).resolve().parents[3] / "annotations" / "sample_data"
SAMPLES = [
    ("demo-llm-jp", "llm_jp_sample.jsonl", "llm-human-eval-jp"),
    ("demo-lfqa", "lfqa_sample.jsonl", "lfqa-multiaspect"),
]
DEMO_RESEARCHER = "researcher"
# Site administration (user accounts, deleting runs) is kept apart from research work, as it would be in a lab.
DEMO_ADMIN = "site-admin"
DEMO_ANNOTATORS = ["annotator1", "annotator2", "annotator3"]


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


class Command(BaseCommand):
    help = (
        "Set up the embedded demo (migrate, load the sample datasets, create demo accounts with fresh random "
        "passwords, open a demo campaign) and run the web server with a real Celery worker."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--addrport", default="127.0.0.1:8000")
        parser.add_argument("--setup-only", action="store_true", help="prepare data and accounts, then exit")

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        researcher = self._account(DEMO_RESEARCHER, staff=True)
        researcher_grant(user=researcher[0])
        annotators = [self._account(name, staff=False) for name in DEMO_ANNOTATORS]
        site_admin = self._account(DEMO_ADMIN, staff=True, superuser=True)
        for name, filename, preset in SAMPLES:
            if not Dataset.objects.filter(owner=researcher[0], name=name).exists():
                with open(SAMPLE_DIR / filename, "rb") as stream:
                    result = dataset_import(stream=stream, name=name, preset=preset, owner=researcher[0])
                self.stdout.write(f"loaded {name}: {result.items} items, {result.ratings} ratings")
        self._demo_campaign(researcher[0], [user for user, _ in annotators])
        self._demo_metric_run(researcher[0])
        self.stdout.write(self.style.SUCCESS("\nDemo accounts (passwords are new on every start):"))
        for user, password in [researcher, *annotators, site_admin]:
            role = "admin" if user.is_superuser else "researcher" if user.is_staff else "annotator"
            self.stdout.write(f"  {role:<10}  {user.username:<12}  {password}")
        if options["setup_only"]:
            return
        self._serve(options["addrport"])

    def _account(self, username: str, *, staff: bool, superuser: bool = False) -> tuple[User, str]:
        password = secrets.token_urlsafe(12)
        user, _ = User.objects.get_or_create(username=username, defaults={"is_staff": staff})
        user.is_staff = staff
        user.is_superuser = superuser
        user.set_password(password)
        user.save()
        return user, password

    def _demo_campaign(self, researcher: User, annotators: list[User]) -> None:
        dataset = Dataset.objects.get(owner=researcher, name="demo-llm-jp")
        if Campaign.objects.filter(dataset=dataset, name="demo-campaign").exists():
            return
        campaign_create(
            name="demo-campaign",
            dataset=dataset,
            raters_per_item=3,
            annotators=annotators,
            created_by=researcher,
        )
        self.stdout.write("opened campaign demo-campaign for annotator1-3")

    def _demo_metric_run(self, researcher: User) -> None:
        """A reference-metric judge needs no provider, so the demo worker has real work as soon as it starts."""
        dataset = Dataset.objects.get(owner=researcher, name="demo-llm-jp")
        if JudgeRun.objects.filter(dataset=dataset).exists():
            return
        config = judge_config_create(
            raw={"name": "demo-rougeL", "method": "metric", "metric": "rougeL", "aspects": ["overall"]},
            owner=researcher,
        )
        run = judge_run_launch(dataset=dataset, config=config, launched_by=researcher)
        self.stdout.write(f"queued judge run {run.name!r} (ROUGE-L vs the references); the worker runs it")

    def _serve(self, addrport: str) -> None:
        env = dict(os.environ)
        worker = subprocess.Popen(
            worker_command("--beat", "--loglevel=INFO", "--concurrency=8"),
            cwd=settings.BASE_DIR,
            env=env,
        )
        self.stdout.write(f"celery worker started (pid {worker.pid}) on {settings.CELERY_BROKER_URL.split('://')[0]}")
        self.stdout.write(self.style.SUCCESS(f"evalsite is at http://{addrport}/  (Ctrl-C stops both)"))
        # SIGTERM (a process manager, `kill`) and SIGHUP (a closed terminal) end Python without unwinding by default,
        # which would skip the finally below and leave the worker running with no server in front of it.
        signal.signal(signal.SIGTERM, _exit_on_signal)
        signal.signal(signal.SIGHUP, _exit_on_signal)
        try:
            call_command("runserver", addrport, use_reloader=False, use_threading=True)
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(timeout=15)
            except subprocess.TimeoutExpired:
                worker.kill()
