"""A project's listing on the index (PEP 691's JSON, PEP 503's HTML), read as it arrives, and the wheel pip would
choose from it for a requirement."""

from __future__ import annotations

import codecs
import dataclasses
import html
import json
import re
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from slimwheel.pypindex.client import KiB, cut
from slimwheel.reqgraph import LookupFailed, Why

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True, kw_only=True)
class IndexFile:
    filename: str
    url: str  # "" when the listing's link is not a URL (while a listing is read: its link, joined once chosen)
    sha256: str  # 64 lower-case hex digits, or "" (none given, or not a SHA-256)
    requires_python: str
    yanked: bool


_FILENAME = re.compile(r"[A-Za-z0-9_.+!-]{1,255}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _file(
    page: str, filename: object, href: object, sha256: object, requires_python: object, yanked: bool
) -> IndexFile:
    """A listing's entry, its fields judged: a file name that is a plain name (it names nothing on disk, yet a path
    in it is never chosen), the link as given (`_joined` once chosen: joining every link of a large page was most
    of its cost), a hash only if it is a SHA-256."""
    if not all(isinstance(v, str) for v in (filename, href)) or not isinstance(requires_python, str | None):
        raise LookupFailed(f"{cut(page)}: a file entry of the wrong shape", why=Why.BAD_ANSWER)
    assert isinstance(filename, str) and isinstance(href, str)
    digest = sha256.lower() if isinstance(sha256, str) else ""
    return IndexFile(
        filename=filename if _FILENAME.fullmatch(filename) else "",
        url=href,
        sha256=digest if _SHA256.fullmatch(digest) else "",
        requires_python=requires_python or "",
        yanked=yanked,
    )


def _joined(page: str, f: IndexFile) -> IndexFile:
    """`f` with its link joined to the page that lists it, without its fragment; "" if it is no URL."""
    try:
        url = urllib.parse.urljoin(page, f.url).partition("#")[0]
        urllib.parse.urlsplit(url).port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        url = ""
    return dataclasses.replace(f, url=url)


def json_files(body: bytes | bytearray, page: str, add: Callable[[IndexFile], None]) -> None:
    """The files of a PEP 691 page, handed to `add` as the decoder meets them: each file's dict becomes one
    IndexFile at once, so a 32 MiB page costs its bytes and its text, not a dict per file kept to the end."""

    def hook(d: dict[str, object]) -> object:
        # Every dict comes here, innermost first, and cannot say where it stands; a dict with a "filename" is taken
        # as a file entry wherever it is. Only an index's own files can be so named: the index chooses them anyway.
        if "filename" not in d:
            return d
        hashes = d.get("hashes")
        yanked = d.get("yanked")
        add(
            _file(
                page,
                d["filename"],
                d.get("url"),
                hashes.get("sha256") if isinstance(hashes, dict) else None,
                d.get("requires-python"),
                bool(yanked),  # PEP 691: true, or a reason (a non-empty string)
            )
        )
        return None

    try:
        data = json.loads(body, object_hook=hook)
    except RecursionError:  # the decoder descends once per nesting level
        raise LookupFailed(f"{cut(page)}: not a PEP 691 project page (nested too deeply)", why=Why.BAD_ANSWER) from None
    except ValueError as exc:  # UnicodeDecodeError included
        raise LookupFailed(f"{cut(page)}: not a PEP 691 project page ({exc})", why=Why.BAD_ANSWER) from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list) or any(f is not None for f in files):
        raise LookupFailed(f"{cut(page)}: not a PEP 691 project page (no list of files)", why=Why.BAD_ANSWER)


# An attribute of a start tag as HTML reads it: a name, then maybe "=" and a value double-, single- or unquoted.
_ATTR = re.compile(r"""([^\s"'>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?""")


_A_TAG = re.compile(r"<a[\s/>]", re.IGNORECASE)
MAX_TAG = 64 * KiB


class HtmlFiles:
    """The file links of a PEP 503 page, fed in chunks. Only `<a ...>` tags are looked at, each found by a scan
    that never goes back: html.parser over the whole page took 7 s for 4 MiB of "<" (it rescans an unfinished
    construct at each character). So a link inside a comment counts too; the index chooses its links anyway."""

    def __init__(self, page: str, add: Callable[[IndexFile], None]) -> None:
        self.page, self.add = page, add
        self._text = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, chunk: bytes, *, final: bool = False) -> None:
        text = self._text + self._decoder.decode(chunk, final)
        at = 0
        while m := _A_TAG.search(text, at):
            end = text.find(">", m.start() + 2) if text[m.end() - 1] != ">" else m.end() - 1
            if end < 0:
                at = m.start()
                break
            self._tag(text[m.start() : end + 1])
            at = end + 1
        else:
            at = max(at, len(text) - 2)  # keep a "<a" split between chunks
        self._text = text[at:]
        if len(self._text) > MAX_TAG:
            raise LookupFailed(f"{cut(self.page)}: a tag over {MAX_TAG} characters", why=Why.BAD_ANSWER)

    def _tag(self, tag: str) -> None:
        if len(tag) > MAX_TAG:
            raise LookupFailed(f"{cut(self.page)}: a tag over {MAX_TAG} characters", why=Why.BAD_ANSWER)
        if ".whl" not in tag:
            return  # no wheel's link: never chosen, so not parsed
        a: dict[str, str] = {}
        for m in _ATTR.finditer(tag, 2):
            a.setdefault(m.group(1).lower(), html.unescape(m.group(2) or m.group(3) or m.group(4) or ""))
        href = a.get("href", "")
        frag = href.partition("#")[2]
        name = urllib.parse.unquote(href.partition("#")[0].rsplit("/", 1)[-1])
        self.add(
            _file(
                self.page,
                name,
                href,
                frag.removeprefix("sha256=") if frag.startswith("sha256=") else None,
                a.get("data-requires-python"),
                "data-yanked" in a,
            )
        )


def parse_listing(body: bytes, content_type: str, page: str) -> list[IndexFile]:
    """The files of a project page, JSON (PEP 691) or HTML (PEP 503)."""
    files: list[IndexFile] = []
    if content_type.split(";")[0].strip().lower() == JSON_TYPE:
        json_files(body, page, files.append)
    else:
        HtmlFiles(page, files.append).feed(body, final=True)
    return [_joined(page, f) for f in files]


# --- choosing the wheel ---------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class Chooser:
    """`choose`, fed one file at a time: only the best candidate so far is kept (two: the best final release and
    the best pre-release, which pip takes only when no final release is admitted)."""

    req: Requirement
    machines: Sequence[str]
    pythons: Sequence[str]
    page: str = ""  # the page being read, which its files' links are relative to
    wheels: int = 0
    best_final: tuple[Version, tuple[int, int, int], IndexFile] | None = None
    best_pre: tuple[Version, tuple[int, int, int], IndexFile] | None = None
    project: str = field(init=False)

    def __post_init__(self) -> None:
        self.project = str(canonicalize_name(self.req.name))
        self.machine = self.machines[0] if self.machines else "x86_64"
        self.exact = [f"cp{p.replace('.', '')}" for p in self.pythons]

    def add(self, f: IndexFile) -> None:
        if f.yanked or not f.filename.endswith(".whl"):
            return
        try:
            name, version, build, tags = parse_wheel_filename(f.filename)
        except (InvalidWheelFilename, ValueError):
            return
        if name != self.project:
            return
        if f.requires_python:
            try:
                rp = SpecifierSet(f.requires_python)
            except InvalidSpecifier:
                rp = SpecifierSet()
            if not any(rp.contains(p, prereleases=True) for p in self.pythons):
                return
        plats = {t.platform for t in tags}
        if "any" not in plats and not any(
            p.endswith(f"_{self.machine}") and p.startswith(("manylinux", "linux", "musllinux")) for p in plats
        ):
            return
        interps = {t.interpreter for t in tags}
        if not any(i.startswith(("py3", "cp3", "py2")) for i in interps):
            return
        self.wheels += 1
        if not self.req.specifier.contains(version, prereleases=True):
            return
        python_rank = next((len(self.exact) - k for k, i in enumerate(self.exact) if i in interps), 0)
        plat_rank = 1 if any(p.startswith("musllinux") for p in plats) and "any" not in plats else 2
        rank = (build[0] if build else 0, python_rank, plat_rank)
        # SpecifierSet.filter's rule: pre-releases count when the specifier asks for them, else only if nothing else
        pre = version.is_prerelease and not self.req.specifier.prereleases
        best = self.best_pre if pre else self.best_final
        if best is None or (version, rank) > (best[0], best[1]):
            entry = (version, rank, _joined(self.page, f))
            if pre:
                self.best_pre = entry
            else:
                self.best_final = entry

    def result(self) -> IndexFile:
        if not self.wheels:
            raise LookupFailed(f"no wheel of {self.project} for Linux {self.machine} on the index", why=Why.NOT_FOUND)
        best = self.best_final or self.best_pre
        if best is None:
            raise LookupFailed(
                f"no wheel of {self.project} that '{self.req.specifier}' admits for Linux {self.machine} on the index",
                why=Why.NOT_FOUND,
            )
        return best[2]


def choose(
    files: Iterable[IndexFile], req: Requirement, *, machines: Sequence[str], pythons: Sequence[str]
) -> IndexFile:
    """The wheel pip would install for `req` on Linux, the wheel's first machine and one of its Pythons: the newest
    version the specifier admits (pre-releases as pip admits them), not yanked, whose Requires-Python admits one of
    `pythons`; of its files, the highest build, then a tag of the first such Python (cp311) before abi3 and py3, then
    manylinux before musllinux. Sdists are not read (their libraries exist only once built)."""
    chooser = Chooser(req=req, machines=machines, pythons=pythons)
    for f in files:
        chooser.add(f)
    return chooser.result()
