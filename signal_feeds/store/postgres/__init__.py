"""The PostgreSQL store (the ``postgres`` extra): :class:`~.store.PostgresStore`.

Chosen by :func:`signal_feeds.store.open_store` for a ``postgresql://`` URL. Only this
package imports psycopg, and only when such a store is opened.
"""
