"""The annotations admin, which Django's autodiscovery finds here: importing the package registers every admin of
the app (the dataset rows, the campaigns, and the gold items)."""

from annotations.admin import campaigns, datasets, gold  # noqa: F401 - registers the campaign, dataset and gold admins
