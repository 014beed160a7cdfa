"""Where annotation campaigns keep their slots for the slot engine (annotations.slots).

A module of its own, below the campaign selectors, so that the crowd-study packages (gold, quality) can use the pool
without importing the campaign selectors, which read gold items to serve them."""

from annotations.models import Assignment, Campaign, Skip, Task
from annotations.slots import SlotPool

# Gold tasks get a personal slot per annotator they are handed to (annotations.gold.selectors decides when).
CAMPAIGN_SLOTS = SlotPool(campaign=Campaign, task=Task, slot=Assignment, skip=Skip, personal="is_gold")
