"""The change feed: what was created or edited, in order, from a stored cursor on.

For programs that act on what is new (post to a chat, send a digest, index elsewhere):
read a page, act on it, store the last change's cursor, repeat. A crash between acting
and storing repeats that page only, never skips one; each change's ``key`` (with its
``fingerprint``) lets the program recognise what it has already done. Works over any
:class:`~signal_feeds.store.protocol.FeedStore`.

```python
from signal_feeds import Store, read_changes

with Store("signal.db") as store:
    for change in read_changes(store, after=saved_cursor, limit=100):
        print(change.kind, change.title, change.cursor)
```
"""

from __future__ import annotations

from signal_feeds.records import Change
from signal_feeds.store.protocol import FeedStore, require_store
from signal_feeds.store.views import MOST_ROWS, limit_argument, text_argument

__all__ = ["DEFAULT_CHANGE_LIMIT", "Change", "read_changes"]

#: Changes in one page unless the caller asks for another size.
DEFAULT_CHANGE_LIMIT = 100


def read_changes(store: FeedStore, *, after: str | None = None,
                 limit: int = DEFAULT_CHANGE_LIMIT,
                 source_id: str | None = None) -> list[Change]:
    """At most ``limit`` changes after the cursor ``after`` (``None``: from the start
    of the log), oldest first; with ``source_id``, only that source's.

    An empty list means nothing new: keep the cursor you have. Raises
    :class:`~signal_feeds.errors.CursorError` for a cursor this database did not issue,
    and :class:`ValueError` for a ``limit`` below 1.
    """
    require_store(store, "read_changes")
    text_argument(after, "after", optional=True)
    text_argument(source_id, "source_id", optional=True)
    limit_argument(limit)
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    return store.changes(after=after, limit=min(limit, MOST_ROWS), source_id=source_id)
