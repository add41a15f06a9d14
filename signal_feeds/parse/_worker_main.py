"""Entry point of a parser process:
``python -m signal_feeds.parse._worker_main MEMORY [stock]``.

Kept apart from :mod:`signal_feeds.parse.processes` so that the classes crossing the pipe are
pickled under their real module name, not ``__main__``.
"""

import sys

from signal_feeds.parse.processes import DEFAULT_PARSE_MEMORY, serve

serve(int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_PARSE_MEMORY,
      tuned=sys.argv[2:3] != ["stock"])
