"""In what order a run asks for its sources: each host's spread evenly over the run.

A run claims its due sources a few chunks at a time, in the order they ask, and a
host takes only ``per_host`` requests at once. Asked in the config's order, a list that
names one host a thousand times in a row (feeds.feedburner.com, medium.com, a list
imported from one OPML file) filled every claim with that host's sources, and the run
made ``per_host`` requests at a time, not ``concurrency``, until they were done: the
hosts of such a list were fetched one after another instead of side by side.

Spread, the ``k``-th of a host's ``n`` sources goes at the fraction ``(k + 1/2) / n`` of
the run, so that every stretch of the order holds each host in proportion to its share
of the list: the run then takes as long as its largest host needs, not the sum of its
largest hosts. Pure: the same hosts give the same order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

__all__ = ["spread_by_host"]


def spread_by_host(hosts: Sequence[str]) -> list[int]:
    """The indexes of ``hosts`` (one host name per source, in the config's order) in the
    order to ask for them: each host's sources keep their order among themselves and
    are spread evenly over the whole; ties go to the source listed first."""
    total = Counter(hosts)
    seen: Counter[str] = Counter()
    keys: list[tuple[float, int]] = []
    for index, host in enumerate(hosts):
        # A float division of two integers is rounded correctly: equal fractions give
        # equal keys (the tie goes to the index), and unequal ones of lists shorter than
        # 2**26 sources never round to the same key. Fraction took four times as long.
        keys.append(((2 * seen[host] + 1) / (2 * total[host]), index))
        seen[host] += 1
    return [index for _, index in sorted(keys)]
