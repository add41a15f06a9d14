"""Parse time of hostile documents in a tuned parser process (one worker's work).

    python benchmarks/hostile_parse.py                 # every case
    python benchmarks/hostile_parse.py amp namespaces  # some of them

``amp``: one ``<description>`` of ``"& "`` repeated (0.5, 1, 2 and 6 MB);
``amp-content`` the same in ``<content:encoded>``; ``amp-title`` in an Atom
``type="html"`` title; ``amp-many``: a 6 or 16 MB body of entries whose content is
330 KB of it;
``namespaces``: elements ``<xN:y xmlns:xN="urn:N">`` each declaring a prefix of its own
(20,000 and 100,000). Each case runs once in a fresh interpreter, tuned as a worker is
(this script's process is not a user's); the time is wall-clock ``parse_job`` and, for
the ``&`` cases, the part spent in ``nh3.clean``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

MB = 1_000_000
RSS = '<rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/"><channel>'


def body(case: str, size: int) -> bytes:
    amp = "& " * (size // 2)
    if case == "amp":
        return (f"{RSS}<title>t</title><item><guid>g</guid><description>{amp}"
                "</description></item></channel></rss>").encode()
    if case == "amp-content":
        return (f"{RSS}<title>t</title><item><guid>g</guid><content:encoded><![CDATA[{amp}"
                "]]></content:encoded></item></channel></rss>").encode()
    if case == "amp-many":  # entries of 330 KB each, the whole body ``size`` bytes
        one = "& " * 165_000
        items = "".join(f"<item><guid>g{i}</guid><content:encoded><![CDATA[{one}]]>"
                        "</content:encoded></item>" for i in range(size // 330_000))
        return f"{RSS}<title>t</title>{items}</channel></rss>".encode()
    if case == "amp-title":
        return ('<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><id>urn:f</id>'
                f'<entry><id>urn:e</id><title type="html"><![CDATA[{amp}]]></title>'
                "</entry></feed>").encode()
    if case == "namespaces":
        many = "".join(f'<x{i}:y xmlns:x{i}="urn:{i}">v</x{i}:y>' for i in range(size))
        return (f"{RSS}<title>t</title><item><guid>g</guid>{many}</item></channel></rss>"
                ).encode()
    raise SystemExit(f"unknown case {case!r}")


SIZES = {"amp": (MB // 2, MB, 2 * MB, 6 * MB), "amp-many": (6 * MB, 16 * MB),
         "amp-content": (MB // 2, MB, 2 * MB), "amp-title": (MB // 2, MB, 2 * MB),
         "namespaces": (20_000, 100_000)}


def measure(case: str, size: int) -> dict[str, float | int | str]:
    import nh3

    from signal_feeds.parse import sanitize
    from signal_feeds.parse._speedups import tune_feedparser
    from signal_feeds.parse.jobs import ParseJob, parse_job
    from signal_feeds.parse.settings import ParseSettings

    assert tune_feedparser()
    spent = [0.0]

    def clean(value: str, **options: object) -> str:
        start = time.perf_counter()
        try:
            return nh3.clean(value, **options)  # type: ignore[arg-type]
        finally:
            spent[0] += time.perf_counter() - start

    sanitize.nh3 = type("nh3", (), {"clean": staticmethod(clean)})  # type: ignore[assignment]
    data = body(case, size)
    start = time.perf_counter()
    outcome = parse_job(ParseJob(source_id="h", body=data, url="https://example.org/",
                                 content_type="", settings=ParseSettings()))
    return {"bytes": len(data), "seconds": time.perf_counter() - start, "nh3": spent[0],
            "entries": outcome.entries, "error": outcome.error,
            "warnings": "; ".join(w[:80] for w in outcome.warnings)}


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        print(json.dumps(measure(sys.argv[2], int(sys.argv[3]))))
        return
    for case in sys.argv[1:] or list(SIZES):
        for size in SIZES[case]:
            out = subprocess.run([sys.executable, __file__, "--one", case, str(size)],
                                 check=True, capture_output=True, text=True).stdout
            r = json.loads(out)
            print(f"{case:<12} {size:>9,} {r['bytes'] / MB:5.2f} MB  {r['seconds']:7.2f} s"
                  f"  nh3 {r['nh3']:6.2f} s  entries {r['entries']}  {r['error']}"
                  f"  [{r['warnings']}]", flush=True)


if __name__ == "__main__":
    main()
