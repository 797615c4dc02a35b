"""Names verl gives its metrics that more than one reader needs."""

from __future__ import annotations

# verl's validation metrics: val-core/ and val-aux/ (0.3 on), val/ and test_score/ before (the step-0 row of
# ``trainer.val_before_train``, verl/trainer/ppo/ray_trainer.py ``fit``)
VALIDATION_PREFIXES = ("val-core/", "val-aux/", "val/", "test_score/")
