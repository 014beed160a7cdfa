"""The annotations app's models.

Django looks for an app's models in its `models` module, so this package names them all: the dataset side
(`datasets`) and the campaign side (`campaigns`), whose constraints and foreign keys refer to one another, then the
crowd-study and research packages' own models, which point back at these.
"""

# ruff: noqa: I001 - the app's own models first: the sub-packages' models import them from here
from annotations.models.datasets import *  # noqa: F403 - the dataset models belong to this app
from annotations.models.campaigns import *  # noqa: F403 - the campaign models belong to this app
from annotations.models.spans import *  # noqa: F403 - error spans belong to this app

from annotations.adjudication.models import *  # noqa: F403 - adjudication belongs to this app
from annotations.gold.models import *  # noqa: F403 - gold items belong to this app
from annotations.quality.models import *  # noqa: F403 - rater exclusions belong to this app
from annotations.recruitment.models import *  # noqa: F403 - recruitment belongs to this app
from annotations.research.models import *  # noqa: F403 - annotator invitations belong to this app
