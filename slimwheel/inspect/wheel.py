"""A wheel: a zip read through `slimwheel.inspect.zipread` (bounded, lie-refusing), plus its metadata.

The parsers of metadata (email, packaging) are imported when metadata is read: `slimwheel.inspect.scan` opens the
wheel and starts inflating its members first, and these imports run beside that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from slimwheel.errors import BadInputError
from slimwheel.inspect.zipread import DEFAULT_LIMITS, Member, ZipLimits, ZipReader, check_member_name

__all__ = [
    "DEFAULT_LIMITS",
    "Member",
    "WheelArchive",
    "WheelMeta",
    "ZipLimits",
    "check_member_name",
    "file_tags",
    "requires_dist",
]


def requires_dist(metadata: str) -> tuple[str, ...]:
    """The Requires-Dist values of a METADATA text, as written (the one reader: size-report, check and repair)."""
    from email.parser import HeaderParser

    return tuple(str(r) for r in HeaderParser().parsestr(metadata).get_all("Requires-Dist") or ())


@dataclass(frozen=True, kw_only=True)
class WheelMeta:
    name: str
    version: str
    # Where pip installs it (cp310-abi3-manylinux_2_28_x86_64): the file name's tags, which pip alone reads; the WHEEL
    # file's Tag lines only for a file not named as a wheel. CuPy 14.2's wheels are named manylinux2014_x86_64 while
    # their WHEEL file says linux_x86_64 (auditwheel renamed them and kept the tag).
    tags: tuple[str, ...]
    requires_dist: tuple[str, ...]
    dist_info: str


def file_tags(filename: str) -> tuple[str, ...]:
    """The tags of a wheel's file name, expanded (`cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64` is two);
    () for a name that is not a wheel's."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import InvalidVersion

    try:
        tags = {str(t) for t in parse_wheel_filename(filename)[3]}
    except (InvalidWheelFilename, InvalidVersion):
        return ()
    # packaging gives a frozenset, whose order changes from run to run with string hashing: the file name's own order
    # keeps reports byte-identical between runs
    interpreters, abis, platforms = (part.split(".") for part in filename.removesuffix(".whl").split("-")[-3:])
    ordered = [f"{i}-{a}-{p}" for i in interpreters for a in abis for p in platforms]
    return tuple(t for t in ordered if t in tags) or tuple(sorted(tags))


class WheelArchive(ZipReader):
    """An open wheel. Use as a context manager; `open`, `read` and `head` may be called from several threads."""

    def metadata(self, read: Callable[[Member], bytes] | None = None) -> WheelMeta:
        """Name, version, tags and Requires-Dist from the .dist-info folder; a zip without one is not a wheel.
        `read`: where the WHEEL and METADATA bytes come from when not from the zip (repair's unpacked copy, which the
        reader checked as it wrote it: the member is not inflated twice)."""
        read = read or self.read
        by_name = {m.name: m for m in self.members}
        infos = sorted({n.split("/", 1)[0] for n in by_name if n.split("/", 1)[0].endswith(".dist-info")})
        dist_info = next((d for d in infos if f"{d}/WHEEL" in by_name and f"{d}/METADATA" in by_name), None)
        if dist_info is None:
            raise BadInputError(
                f"{self.path}: not a wheel: no top-level *.dist-info folder with WHEEL and METADATA files"
            )
        from email.parser import HeaderParser

        parser = HeaderParser()
        try:
            wheel = parser.parsestr(read(by_name[f"{dist_info}/WHEEL"]).decode("utf-8"))
            meta_text = read(by_name[f"{dist_info}/METADATA"]).decode("utf-8")
            meta = parser.parsestr(meta_text)
        except UnicodeDecodeError:
            raise BadInputError(f"{self.path}: {dist_info}: WHEEL or METADATA is not UTF-8 text") from None
        if not meta.get("Name") or not meta.get("Version"):
            raise BadInputError(f"{self.path}: {dist_info}/METADATA: Name or Version missing")
        return WheelMeta(
            name=str(meta["Name"]),
            version=str(meta["Version"]),
            tags=file_tags(self.path.name) or tuple(str(t) for t in wheel.get_all("Tag") or ()),
            requires_dist=requires_dist(meta_text),
            dist_info=dist_info,
        )
