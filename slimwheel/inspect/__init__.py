"""Inspection of wheels and binaries: files, ELF sections and dependencies, fatbin entries, GPU coverage.

`slimwheel.inspect.scan.inspect_wheel` is the entry point (`report` assembles what it reads). The readers under it are the only ones in slimwheel:
`files` (regular files only, mapped), `zipread` (bounded, lie-refusing zip members; `extract` for repair),
`wheel` (metadata), `elf` and `fatbin` (linear time, bounded memory). docs/security.md lists what they refuse.
"""
