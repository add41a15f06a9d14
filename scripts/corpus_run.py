"""Robustness run: ``signal parse`` over every file of the third-party feed corpora.

    python scripts/corpus_run.py [CORPORA_DIR] [--no-cli] [--batch N]

CORPORA_DIR defaults to ``../shared/corpora`` next to the repository. The corpora are
read where they are and never copied into the repository.

Two passes:

1. the library (``signal_feeds.parse_files``, one worker process pool), timed per file;
2. the console command (``signal parse FILE ...`` in batches), which must exit 0 or 1,
   print one JSON line per file and never a traceback.

A file "crashes" when an exception escapes, when the command prints a traceback or no
JSON line for it, or when its error is one of the catch-all messages (an exception
nobody expected: "feed parser failed: ...", "parser process died ...", "parser returned
nothing", "internal error"). Prints files / ok / clear errors / crashes and the slowest
files; exits 1 if anything crashed.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from signal_feeds import parse_files

REPO = Path(__file__).resolve().parent.parent
CATCH_ALL = ("feed parser failed:", "parser process died", "parser returned nothing",
             "internal error")


def corpus_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def is_crash(result: dict[str, object]) -> bool:
    error = str(result.get("error") or "")
    return not result.get("ok") and any(error.startswith(c) for c in CATCH_ALL)


def library_pass(files: list[Path], root: Path) -> tuple[dict[str, int], list[str],
                                                          list[tuple[float, str]],
                                                          collections.Counter[str]]:
    counts = {"files": len(files), "ok": 0, "clear errors": 0, "crashes": 0}
    crashes: list[str] = []
    timings: list[tuple[float, str]] = []
    reasons: collections.Counter[str] = collections.Counter()
    started = time.monotonic()
    # A tiny first document starts the worker, so no corpus file is timed with it.
    with tempfile.NamedTemporaryFile(suffix=".xml", delete=False) as warm:
        warm.write(b'<rss version="2.0"><channel><title>w</title></channel></rss>')
    results = parse_files([Path(warm.name), *files])
    next(results)
    os.unlink(warm.name)
    for path in files:
        t0 = time.monotonic()
        try:
            result = next(results)
        except Exception as exc:  # an uncaught exception: the worst kind of crash
            counts["crashes"] += 1
            crashes.append(f"{path.relative_to(root)}: {type(exc).__name__}: {exc}")
            results = parse_files(files[files.index(path) + 1:])
            continue
        timings.append((time.monotonic() - t0, str(path.relative_to(root))))
        if result["ok"]:
            counts["ok"] += 1
        elif is_crash(result):
            counts["crashes"] += 1
            crashes.append(f"{path.relative_to(root)}: {result['error']}")
        else:
            counts["clear errors"] += 1
            reasons[str(result["error"]).split(" (")[0].split(":")[0][:60]] += 1
    counts["seconds"] = round(time.monotonic() - started)
    return counts, crashes, timings, reasons


def cli_pass(files: list[Path], root: Path, batch: int) -> list[str]:
    problems: list[str] = []
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    for start in range(0, len(files), batch):
        chunk = files[start:start + batch]
        proc = subprocess.run([sys.executable, "-m", "signal_feeds", "parse",
                               *map(str, chunk)], capture_output=True, env=env,
                              timeout=30 * 60, check=False)
        stderr = proc.stderr.decode("utf-8", "replace")
        if proc.returncode not in (0, 1) or "Traceback" in stderr:
            problems.append(f"batch at {chunk[0].relative_to(root)}: exit {proc.returncode}: "
                            f"{stderr.strip()[-500:]}")
            continue
        seen = set()
        for line in proc.stdout.decode("utf-8", "replace").splitlines():
            result = json.loads(line)
            seen.add(result["file"])
            if is_crash(result):
                problems.append(f"{result['file']}: {result['error']}")
        missing = [p for p in chunk if str(p) not in seen]
        problems += [f"{p.relative_to(root)}: no JSON line" for p in missing]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="?", type=Path,
                        default=REPO.parent / "shared" / "corpora")
    parser.add_argument("--no-cli", action="store_true", help="skip the console pass")
    parser.add_argument("--batch", type=int, default=500, help="files per 'signal parse'")
    args = parser.parse_args(argv)
    root: Path = args.corpora.resolve()
    if not root.is_dir():
        print(f"corpus_run: no such directory: {root}", file=sys.stderr)
        return 2
    files = corpus_files(root)
    counts, crashes, timings, reasons = library_pass(files, root)
    print(f"corpus: {root}")
    print(" / ".join(f"{k} {v}" for k, v in counts.items()))
    timings.sort(reverse=True)
    print("slowest files:")
    for seconds, name in timings[:5]:
        print(f"  {seconds:7.3f} s  {name}")
    print("clear errors by reason:")
    for reason, n in reasons.most_common(8):
        print(f"  {n:5d}  {reason}")
    for line in crashes:
        print(f"CRASH {line}")
    if not args.no_cli:
        problems = cli_pass(files, root, args.batch)
        print(f"signal parse (console, batches of {args.batch}): "
              f"{'no problems' if not problems else f'{len(problems)} problems'}")
        for line in problems:
            print(f"CRASH (cli) {line}")
        crashes += problems
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
