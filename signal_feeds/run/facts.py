"""What a run hands the decider about one response (the page an error status came with
named by its title), apart from the stages that carry the decision out."""

from __future__ import annotations

from signal_feeds.decide.decider import ResponseFacts
from signal_feeds.http.fetch import FetchResponse
from signal_feeds.parse.settings import ParseSettings

__all__ = ["response_facts"]


def response_facts(response: FetchResponse, settings: ParseSettings) -> ResponseFacts:
    """The response as the decider reads it: status, headers, the body's digest under
    the settings that shape its rows, and the title of a page an error came with."""
    title = ""
    if response.status >= 400 and response.body:
        # Imported here: a run of 304s never needs it (nor html.parser, which it loads).
        from signal_feeds.parse.discovery import page_title

        title = page_title(response.body) or ""
    return ResponseFacts(status=response.status, url=response.url, headers=response.headers,
                         permanent_url=response.permanent_url,
                         body_digest=settings.input_digest(response.body_digest),
                         wire_bytes=response.wire_bytes, page_title=title,
                         warnings=response.warnings)
