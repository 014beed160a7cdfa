from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.management.lookup import add_owner_argument, dataset_or_error
from annotations.models import Campaign, Dataset
from judging.certification import selectors
from judging.certification.certificates import DEFAULT_EPSILON, DEFAULT_Q, certificate_request
from judging.certification.drift import drift_checks_start
from judging.certification.evaluations import CertificationError
from judging.certification.reference_sets import reference_set_create
from judging.management import judge_versions
from judging.models import Certificate, CertificateStatus


class Command(BaseCommand):
    help = (
        "Certify a judge version against a frozen human reference set with the alternative-annotator test: name a "
        "reference set (reference-set), certify the version of a judge run on it (version), list versions and "
        "certificates (status), or start the drift checks now (drift)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        named = sub.add_parser("reference-set", help="name and freeze a reference set of human ratings")
        named.add_argument("--dataset", required=True)
        named.add_argument("--name", required=True, help="the reference set's name, unique in the dataset")
        named.add_argument("--campaign", help="freeze this campaign's ratings (default: the dataset's)")
        named.add_argument("--origin", default="all", choices=["all", "import", "app"])
        add_owner_argument(named)
        version = sub.add_parser("version", help="certify the version of a judge run on a reference set")
        judge_versions.add_version_arguments(version, judge_help="name of a judge run whose version is certified")
        version.add_argument("--epsilon", type=float, default=DEFAULT_EPSILON)
        version.add_argument("--q", type=float, default=DEFAULT_Q)
        judge_versions.add_wait_and_owner_arguments(version, outcome="verdict")
        status = sub.add_parser("status", help="the dataset's judge versions, their standing and certificates")
        status.add_argument("--dataset", required=True)
        add_owner_argument(status)
        drift = sub.add_parser("drift", help="start a drift check for every certified version in use")
        drift.add_argument("--sample-size", type=int, default=20)
        drift.add_argument("--seed", type=int, help="the sample's seed (default: a random one, stored)")

    def handle(self, *args: object, **options: object) -> None:
        action = options["action"]
        if action == "drift":
            started = drift_checks_start(
                sample_size=int(str(options["sample_size"])), seed=_int_or_none(options["seed"])
            )
            self.stdout.write(f"{started} drift check(s) started")
            return
        dataset = dataset_or_error(str(options["dataset"]), options["owner"])
        if action == "reference-set":
            self._reference_set(dataset, options)
        elif action == "version":
            self._certify(dataset, options)
        else:
            self._status(dataset)

    def _reference_set(self, dataset: Dataset, options: dict[str, object]) -> None:
        campaign = None
        if options["campaign"]:
            campaign = Campaign.objects.filter(dataset=dataset, name=str(options["campaign"])).first()
            if campaign is None:
                raise CommandError(f"no campaign named {options['campaign']!r} on {dataset.name!r}")
        try:
            reference = reference_set_create(
                dataset=dataset, name=str(options["name"]), owner=None, campaign=campaign, origin=str(options["origin"])
            )
        except CertificationError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"reference set {reference.name!r} frozen with {reference.ratings.count()} ratings "
            f"at {reference.frozen_at:%Y-%m-%d %H:%M:%S} UTC"
        )

    def _certify(self, dataset: Dataset, options: dict[str, object]) -> None:
        version, reference = judge_versions.version_and_reference_set_or_error(dataset, options)
        try:
            certificate = certificate_request(
                version=version,
                reference_set=reference,
                requested_by=None,
                epsilon=float(str(options["epsilon"])),
                q=float(str(options["q"])),
            )
        except CertificationError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"certificate {certificate.pk}: version {version.short} on {reference.name!r}, run "
            f"{certificate.run.judge.name if certificate.run else '-'} started"
        )
        deciding = (CertificateStatus.PENDING, CertificateStatus.EVALUATING)
        judge_versions.wait_for_worker(
            certificate, lambda: certificate.status not in deciding, float(str(options["wait"]))
        )
        certificate.refresh_from_db()
        self._print_certificate(certificate)
        if certificate.status in (CertificateStatus.FAILED, CertificateStatus.UNDEFINED):
            raise CommandError(f"not certified: {certificate.reason}")

    def _print_certificate(self, certificate: Certificate) -> None:
        self.stdout.write(f"certificate {certificate.pk} [{certificate.fingerprint[:12]}]: {certificate.status}")
        if certificate.reason:
            self.stdout.write(f"  {certificate.reason}")
        if certificate.suspension_reason:
            self.stdout.write(f"  suspended: {certificate.suspension_reason}")
        for row in selectors.certificate_summary(certificate):
            omega = "undefined" if row["omega"] is None else f"{row['omega']:.2f}"
            rho = "undefined" if row["rho"] is None else f"{row['rho']:.2f}"
            self.stdout.write(
                f"  {row['aspect']}: {row['verdict']} (epsilon {row['epsilon']:g}, q {row['q']:g}, omega {omega}, "
                f"rho {rho}, n {row['n_answers']} answers, {row['raters_tested']} raters tested)"
            )

    def _status(self, dataset: Dataset) -> None:
        rows = selectors.versions_of_dataset(dataset)
        if not rows:
            self.stdout.write("no judge version on this dataset yet")
        for row in rows:
            version = row.version
            self.stdout.write(
                f"{version.config_name} [{version.short}] model {version.provider_model}: {row.standing}, "
                f"{len(row.runs)} run(s)"
            )
            for certificate in row.certificates:
                self._print_certificate(certificate)
        for run in selectors.unversioned_runs(dataset):
            self.stdout.write(f"{run.judge.name}: no version ({run.version_problem})")


def _int_or_none(value: object) -> int | None:
    return None if value is None else int(str(value))
