"""`fsutil.files_under`, the walk of unpacked wheels behind `digest_tree`, `pack_to` and `scan_elfs` (issue 41: repair
of a 60,000-member wheel): the same files in the same order as the `sorted(root.rglob("*"))` it replaced."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from slimwheel import wheelfile
from slimwheel.fsutil import files_under

_PART = st.sampled_from(["a", "b", "a-b", "a.b", "B", "_", "z0", "a b"])
_PATHS = st.lists(st.lists(_PART, min_size=1, max_size=4).map("/".join), min_size=1, max_size=30)


def _tree(root: Path, paths: list[str], links: list[int]) -> None:
    for rel in paths:
        p = root / rel
        if any(q.is_file() for q in [p, *p.parents] if q != root and q.is_relative_to(root)):
            continue  # a file already stands where a folder of this path would be
        if p.is_dir():
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(rel.encode())
    files = sorted(p for p in root.rglob("*") if p.is_file())
    for i in links:  # links to files and to folders, beside real ones
        target = files[i % len(files)] if files else root
        link = root / f"link{i}"
        if not os.path.lexists(link):
            link.symlink_to(target if i % 2 else target.parent)


@settings(max_examples=150, deadline=None)
@given(paths=_PATHS, links=st.lists(st.integers(0, 50), max_size=4))
def test_the_same_files_in_the_same_order_as_rglob(paths: list[str], links: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _tree(root, paths, links)
        # rglob does not descend into links to folders; is_file follows links to files
        expected = [p.relative_to(root).as_posix() for p in sorted(root.rglob("*")) if p.is_file()]
        assert [rel for rel, _ in files_under(root)] == expected
        no_links = [
            p.relative_to(root).as_posix() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()
        ]
        assert [rel for rel, _ in files_under(root, links=False)] == no_links


def test_digest_tree_sizes_and_hashes(tmp_path: Path) -> None:
    import hashlib

    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "x.bin").write_bytes(b"\0" * 5_000_000 + b"end")  # more than one read block
    (tmp_path / "pkg" / "empty").write_bytes(b"")
    got = wheelfile.digest_tree(tmp_path)
    assert list(got) == ["pkg/empty", "pkg/sub/x.bin"]
    assert got["pkg/sub/x.bin"].size == 5_000_003
    assert got["pkg/sub/x.bin"].sha256 == hashlib.sha256(b"\0" * 5_000_000 + b"end").digest()
    assert got["pkg/empty"].size == 0
