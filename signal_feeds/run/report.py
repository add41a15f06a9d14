"""The run report, where callers of the run look for it.

Defined in :mod:`signal_feeds.decide.report`: the decider makes each line, and the
decisions import nothing from the run.
"""

from signal_feeds.decide.report import FAILING_STATUSES, RunReport, SourceReport, SourceStatus

__all__ = ["FAILING_STATUSES", "RunReport", "SourceReport", "SourceStatus"]
