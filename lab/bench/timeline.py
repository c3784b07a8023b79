"""Where a `slimwheel size-report` run spends its time: a timeline of one run, in milliseconds since the harness
started (the interpreter's own start, about 16 ms here, comes before it), with the thread that reached each step.

    .venv/bin/python lab/bench/timeline.py WHEEL            # one run; the report goes to /dev/null
    .venv/bin/python lab/bench/timeline.py WHEEL --runs 3   # three runs, in fresh interpreters

Steps: the CLI and the command imported; each ELF member parsed (in a worker, after it inflated), with how long the
parse took; the metadata read and the report's modules imported (the calling thread, while the members inflate);
all members collected; the report assembled; the table rendered. The numbers in inspect/scan.py and inspect/zipread.py
(the calling thread starved by a second importing thread, or by stepped inflating) were seen this way, comparing
runs of the code before and after each change. Wraps slimwheel's own functions; never on the product's import path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

# slimwheel as pip installs it, with its bytecode (see lab/bench/cost.py: this workplace sets PYTHONDONTWRITEBYTECODE).
AS_INSTALLED = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

_CHILD = r"""
import sys, threading, time
T0 = time.perf_counter()

def mark(what):
    print(f"{(time.perf_counter() - T0) * 1000:8.1f} ms  [{threading.current_thread().name}] {what}", file=sys.stderr)

import slimwheel.cli as cli
mark("CLI imported")
import slimwheel.commands.size_report as sr
mark("size-report imported")
import slimwheel.inspect.scan as scan

def wrap(name, before=None, after=None):
    inner = getattr(scan, name)
    def f(*a, **k):
        if before: mark(before)
        t = time.perf_counter()
        r = inner(*a, **k)
        if after: mark(after(a, time.perf_counter() - t))
        return r
    setattr(scan, name, f)

wrap("_parsed", after=lambda a, s: f"parsed {a[1].rsplit('/', 1)[-1]} in {s * 1000:.1f} ms")
wrap("_file_entries", before="metadata read", after=lambda a, s: "report's modules imported")
wrap("_assembled", before="members collected", after=lambda a, s: "report assembled")
emit = sr.emit
def emitted(*a):
    mark("rendered")
    emit(*a)
sr.emit = emitted
sys.argv = ["slimwheel", "-q", "size-report", sys.argv[1]]
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    rc = cli.main()
mark(f"end (exit {rc})")
"""


def main() -> int:
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    runs = int(args[args.index("--runs") + 1]) if "--runs" in args else 1
    for i in range(runs):
        if runs > 1:
            print(f"run {i + 1}:", file=sys.stderr)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", _CHILD, args[0]], check=True, env=AS_INSTALLED)
        print(f"{(time.perf_counter() - t) * 1000:8.1f} ms  the whole process", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
