"""The annotations admin, which Django's autodiscovery finds here: importing the package registers every admin of
the app (the dataset rows, the campaigns, and the gold items through the dataset rows' admin)."""

from annotations.admin import campaigns, datasets  # noqa: F401 - registers the campaign and dataset admins
