"""CPU per entry of one parser process's work (parse, identify, match keys), stock
feedparser against the worker-only tuning, on the benchmark corpus and on short entries.

    python benchmarks/parse_cpu.py

Each side runs in a fresh interpreter (tuning is per process); the median of five
passes over 20 feeds x 100 entries is printed in ms of CPU per entry.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from xml.sax.saxutils import escape

sys.path.insert(0, str(Path(__file__).resolve().parent))

FEEDS, ENTRIES, PASSES = 20, 100, 5


def short_feed(index: int) -> bytes:
    """A one-line title and a summary of about 300 bytes per entry."""
    rng = random.Random(index)
    words = ["signal", "feed", "entry", "update", "note", "river", "market", "city", "plan"]
    items = []
    for n in range(ENTRIES):
        text = " ".join(rng.choice(words) for _ in range(45))[:290]
        items.append(f"<item><guid>s{index}-{n}</guid><title>{escape(text[:60])}</title>"
                     f"<link>https://s{index}.example.org/{n}</link>"
                     f"<pubDate>Wed, 02 Dec 2026 12:{n % 60:02d}:00 GMT</pubDate>"
                     f"<description>&lt;p&gt;{escape(text)}&lt;/p&gt;</description></item>")
    return (f'<rss version="2.0"><channel><title>s{index}</title>{"".join(items)}'
            "</channel></rss>").encode()


def bodies(kind: str) -> list[bytes]:
    if kind == "short":
        return [short_feed(i) for i in range(FEEDS)]
    from bench.corpus import Corpus, build_feed, render

    corpus = Corpus(feeds=FEEDS, entries=ENTRIES)
    return [render(build_feed(corpus, i)) for i in range(FEEDS)]


def measure(kind: str, tuned: bool) -> float:
    from signal_feeds.parse.processes import ParseJob, parse_job
    from signal_feeds.parse.settings import ParseSettings

    if tuned:
        from signal_feeds.parse._speedups import tune_feedparser

        assert tune_feedparser()
    jobs = [ParseJob(source_id="b", body=b, url="https://example.org/", content_type="",
                     settings=ParseSettings()) for b in bodies(kind)]
    parse_job(jobs[0])  # warm imports
    passes = []
    for _ in range(PASSES):
        t0 = time.process_time()
        for job in jobs:
            parse_job(job)
        passes.append((time.process_time() - t0) * 1000 / (FEEDS * ENTRIES))
    return statistics.median(passes)


def main() -> None:
    if len(sys.argv) == 3:
        print(json.dumps(measure(sys.argv[1], sys.argv[2] == "tuned")))
        return
    for kind in ("benchmark", "short"):
        results = {}
        for side in ("stock", "tuned"):
            out = subprocess.run([sys.executable, __file__, kind, side], check=True,
                                 capture_output=True, text=True).stdout
            results[side] = float(out)
        print(f"{kind:<10} stock {results['stock']:.3f} ms/entry, tuned "
              f"{results['tuned']:.3f} ms/entry ({results['stock'] / results['tuned']:.2f}x)")


if __name__ == "__main__":
    main()
