"""``signal search``: full-text search over the stored entries (one library call, then
print). Exit codes as in :mod:`.commands`: 0 hits found, 1 no hit or failed, 2 usage
error (a query that is not valid FTS5 syntax included)."""

from __future__ import annotations

import click

from signal_feeds.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    LIMIT_RANGE,
    config_option,
    db_option,
    fail,
    json_option,
    say,
    say_json_object,
)
from signal_feeds.cli.reading import (
    entry_line,
    known_source,
    open_store,
    parse_since,
    selection_options,
)
from signal_feeds.errors import SignalError
from signal_feeds.store.fulltext import DEFAULT_SEARCH_LIMIT

__all__ = ["search"]


class _SearchCommand(click.Command):
    """``signal search``: a query word that starts with "-" (a search box's "leave
    out") is read by click as an option; the error says how to pass it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            if exc.option_name.startswith("--"):  # a mistyped option, not a word
                raise
            # "-links" is reported as "-l": name the argument as typed.
            word = next((a for a in given if a.startswith(exc.option_name)),
                        exc.option_name)
            # Leaving the word out is what a search box's minus means; after '--' the
            # query reaches FTS5, which refuses a "-" before a word just the same.
            raise click.UsageError(
                f"{exc.message} (to leave a word out, write NOT before it: "
                f"NOT {word[1:] or word}; a word that itself starts with '-' goes in "
                "double quotes after '--')", ctx=exc.ctx) from exc


@click.command(cls=_SearchCommand, short_help="Search the entries by their words.")
@click.argument("words", nargs=-1, metavar="[QUERY]...")
@config_option
@db_option
@selection_options
@click.option("--limit", default=DEFAULT_SEARCH_LIMIT, show_default=True,
              type=LIMIT_RANGE, help="At most N hits.")
@click.option("--rebuild", is_flag=True,
              help="Index every stored entry again (safe to repeat), then search QUERY "
                   "if one is given.")
@json_option
def search(words: tuple[str, ...], config_path: str | None, db_path: str | None,
           source_id: str | None, since: str | None, include_duplicates: bool, limit: int,
           rebuild: bool, as_json: bool) -> None:
    """Search the entries' titles, summaries and contents, best match first.

    QUERY uses SQLite FTS5 syntax: words (all must occur), "an exact phrase",
    AND / OR / NOT, prefix*, title:word. Case and accents are ignored; a word with
    punctuation (covid-19, node.js) is the phrase of its parts. Several arguments are
    one query (signal search harvest festival); quote a phrase for the shell
    ('"harvest festival"'). Each hit shows a snippet with the matched words in
    [brackets]; one hit per story unless --all. Exit 1 when nothing matches, 2 for a
    query that is not valid syntax.
    """
    from signal_feeds.store.reading import search_entries

    query = " ".join(words) if words else None
    if query is None and not rebuild:
        raise click.UsageError("give a QUERY (or --rebuild)")
    if query is None:
        # They choose hits, and a rebuild alone shows none: said, not ignored.
        ctx = click.get_current_context()
        given = [name for name, value in (("--source", source_id), ("--since", since),
                                          ("--all", include_duplicates or None))
                 if value is not None]
        if ctx.get_parameter_source("limit") is click.core.ParameterSource.COMMANDLINE:
            given.append("--limit")
        if given:
            raise click.UsageError(f"{', '.join(given)}: choose hits, and --rebuild "
                                   "without a QUERY searches nothing (it indexes them all)")
    when = parse_since(since)
    try:
        with open_store(config_path, db_path) as store:
            indexed = store.rebuild_search_index() if rebuild else None
            hits = [] if query is None else search_entries(
                store, query, source_id=source_id, since=when, limit=limit,
                include_duplicates=include_duplicates)
            if query is not None and not hits:
                known_source(store, source_id, config_path, db_path)
    except SignalError as exc:
        fail(exc)
    if as_json:
        say_json_object({"query": query}, "hits", (h.to_dict() for h in hits),
                        None if indexed is None else {"indexed": indexed})
    else:
        if indexed is not None:
            say(f"search index rebuilt: {indexed} entries")
        for hit in hits:
            say(entry_line(hit.entry))
            if hit.snippet:
                say(f"    {hit.snippet}")
    raise SystemExit(EXIT_OK if hits or query is None else EXIT_FAILED)
