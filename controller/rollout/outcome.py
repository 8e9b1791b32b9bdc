"""How a rollout ends (:class:`Outcome`) and the signals the engine's steps raise."""

from __future__ import annotations

from dataclasses import dataclass

from lwsflow.controller.api.phases import Result
from lwsflow.controller.rollout.report import RolloutReport

SUCCEEDED, ROLLED_BACK, FAILED = Result.SUCCEEDED, Result.ROLLED_BACK, Result.FAILED
ABORTED, PAUSED, PAUSED_INCONCLUSIVE = Result.ABORTED, Result.PAUSED, Result.PAUSED_INCONCLUSIVE
INCONCLUSIVE_REASON = "AnalysisInconclusive"  # the Event's reason, and how the paused state's reason begins
# the CLI's exit code for it: neither done (0) nor failed (1), and not bad input (2)
EXIT_INCONCLUSIVE = 3


@dataclass
class Outcome:
    """How a rollout ended; ``exit_code`` is what the CLI returns."""

    result: Result
    message: str
    report: RolloutReport

    @property
    def exit_code(self) -> int:
        if self.result == PAUSED_INCONCLUSIVE:
            return EXIT_INCONCLUSIVE
        return 0 if self.result == SUCCEEDED else 1


class Interrupted(Exception):
    """Raised by an ``on_step`` callback to stop the engine between two steps (tests, Ctrl-C)."""


class StageFailed(Exception):
    """A stage did not pass (deadline, hook, guard); carries the reason for events and the report."""


class QuotaHeld(Exception):
    """A stage could not pass because Kueue holds groups of the target (rollout/kueue_hold.py): the
    rollout pauses instead of failing; carries the stage and what Kueue lacks."""


class Replan(Exception):
    """Stop waiting and ask the planner again (pause, abort, a foreign change, a conflict)."""


class ForeignTemplate(Exception):
    """The template is neither this rollout's target nor the previous one: someone else is rolling."""
