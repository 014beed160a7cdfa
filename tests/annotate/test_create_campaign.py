import pytest
from django.core.management import CommandError, call_command

from annotations.models import Campaign
from tests.annotate.factories import make_dataset

pytestmark = pytest.mark.django_db


def test_create_campaign_command(tmp_path, researcher, annotator1, annotator2, capsys):
    make_dataset("cmd set", owner=researcher, items=2)
    guide = tmp_path / "guide.md"
    guide.write_text("# 評価の手順\nRead **all** candidates.", encoding="utf-8")
    call_command(
        "create_campaign",
        "Pilot Ξ",
        "--dataset",
        "cmd set",
        "--raters-per-item",
        "2",
        "--candidates-per-task",
        "2",
        "--annotators",
        "annotator1, annotator2",
        "--aspects",
        "factuality",
        "--guidelines",
        str(guide),
        "--show-reference",
        "--optional-rationale",
    )
    campaign = Campaign.objects.get(name="Pilot Ξ")
    assert campaign.tasks.count() == 4 and campaign.raters_per_item == 2
    assert set(campaign.annotators.values_list("username", flat=True)) == {"annotator1", "annotator2"}
    assert list(campaign.aspects.values_list("name", flat=True)) == ["factuality"]
    assert (
        campaign.guidelines.startswith("# 評価の手順") and campaign.show_reference and not campaign.rationale_required
    )
    assert "4 tasks x 2 raters, 2 annotators" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dataset", "missing"], "no dataset named 'missing'"),
        (["--dataset", "cmd set", "--annotators", "ghost"], "no user named 'ghost'"),
        (["--dataset", "cmd set", "--aspects", "style"], "no aspect 'style'"),
        (["--dataset", "cmd set", "--raters-per-item", "0"], "between 1 and 100"),
    ],
)
def test_create_campaign_command_errors(researcher, args, message):
    make_dataset("cmd set", owner=researcher, items=1)
    with pytest.raises(CommandError, match=message):
        call_command("create_campaign", "bad", *args)
    assert not Campaign.objects.exists()
