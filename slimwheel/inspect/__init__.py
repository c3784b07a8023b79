"""Inspection of wheels and binaries: files, ELF sections and dependencies, fatbin entries, GPU coverage.

`slimwheel.inspect.report.inspect_wheel` is the entry point; `fatbin` and `elf` are the readers it uses.
"""
