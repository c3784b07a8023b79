"""Slimming fatbin containers in place, on synthesized ELF files: re-reading the result gives exactly the kept
entries, with their payload bytes unchanged; every other byte of the file is unchanged or a freed zero."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slimwheel.cuda.arch import CC, Kind, Target, served_by
from slimwheel.errors import BadInputError
from slimwheel.inspect.elf import read_elf
from slimwheel.postbuild.fatbin_edit import SlimRequest, entry_spans, keep_mask, slim_elf
from testkit.binsynth import elf, fatbin, fatbin_entry, pad8

SASS_SMS = [75, 80, 86, 89, 90, 100, 120]
PTX_SMS = [75, 80, 90, 100, 120]


def _payload(rng: random.Random, n: int) -> bytes:
    # Non-zero bytes, so that a payload cut short or shifted cannot pass for zero fill.
    return bytes(rng.randrange(1, 256) for _ in range(n))


def _entry(kind: str, sm: int, payload: bytes, *, compressed: bool = False) -> bytes:
    if compressed:
        return fatbin_entry(
            kind=kind,
            sm=sm,
            flags=0x8011,
            payload=pad8(payload),
            compressed_size=len(payload),
            uncompressed_size=len(payload) * 4,
        )
    return fatbin_entry(kind=kind, sm=sm, payload=payload)


@st.composite
def containers(draw: st.DrawFn) -> list[list[tuple[str, int, bytes, bool]]]:
    """Several containers, each a few SASS/PTX/LTO entries with random payloads (sizes multiple of 8, as nvcc's)."""
    seed = draw(st.integers(0, 2**32))
    rng = random.Random(seed)
    out = []
    for _ in range(draw(st.integers(1, 4))):
        entries = []
        kinds = draw(
            st.lists(
                st.one_of(
                    st.tuples(st.just("sass"), st.sampled_from(SASS_SMS)),
                    st.tuples(st.just("ptx"), st.sampled_from(PTX_SMS)),
                    st.tuples(st.just("lto-ir"), st.sampled_from(PTX_SMS)),
                ),
                min_size=0,
                max_size=6,
                unique=True,
            )
        )
        for kind, sm in kinds:
            entries.append((kind, sm, _payload(rng, 8 * rng.randrange(1, 40)), draw(st.booleans())))
        out.append(entries)
    return out


def _so(cs: list[list[tuple[str, int, bytes, bool]]]) -> bytes:
    section = b"".join(pad8(fatbin([_entry(k, sm, p, compressed=c) for k, sm, p, c in ents])) for ents in cs)
    return elf(sections={".text": b"\xc3" * 40, ".nv_fatbin": section, ".rodata": b"rodata!!"})


def _expected_kept(ents: list[tuple[str, int, bytes, bool]], request: SlimRequest) -> list[tuple[str, int, bytes]]:
    """The rule, stated independently of slimwheel.postbuild.fatbin_edit: per container, the target the driver would pick
    for each requested CC (served_by), plus the requested PTX; LTO-IR always stays."""
    targets = {
        (k, sm): Target(CC(sm // 10, sm % 10), Kind.SASS if k == "sass" else Kind.PTX)
        for k, sm, _p, _c in ents
        if k != "lto-ir"
    }
    picked = {served_by(cc, targets.values())[1] for cc in request.ccs}
    ptx = [t for t in targets.values() if t.kind is Kind.PTX]
    if request.ptx == "newest" and ptx:
        picked.add(max(ptx, key=lambda t: t.cc))
    picked |= {t for t in ptx if t.cc in request.ptx_ccs}
    return [(k, sm, p) for k, sm, p, _c in ents if k == "lto-ir" or targets[(k, sm)] in picked]


requests = st.builds(
    SlimRequest,
    ccs=st.lists(
        st.sampled_from([CC(7, 5), CC(8, 0), CC(8, 6), CC(8, 9), CC(9, 0), CC(10, 0), CC(12, 0)]),
        min_size=1,
        max_size=3,
        unique=True,
    ).map(tuple),
    ptx=st.sampled_from(["needed", "newest"]),
    ptx_ccs=st.lists(st.sampled_from([CC(8, 0), CC(12, 0)]), max_size=1, unique=True).map(tuple),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cs=containers(), request=requests)
def test_reread_gives_exactly_the_kept_entries_with_identical_payloads(
    cs: list[list[tuple[str, int, bytes, bool]]], request: SlimRequest
) -> None:
    data = _so(cs)
    out = slim_elf(data, "lib.so", request)
    assert len(out.data) == len(data)
    before, after = read_elf(data, "before"), read_elf(out.data, "after")
    assert after.sections == before.sections
    assert len(after.fatbins) == len(before.fatbins)
    for ents, fb_before, fb_after in zip(cs, before.fatbins, after.fatbins, strict=True):
        assert fb_after.offset == fb_before.offset  # the host wrapper's pointer stays valid
        want = _expected_kept(ents, request)
        assert [(e.kind, int(e.arch)) for e in fb_after.entries] == [(k, sm) for k, sm, _p in want]
        spans = entry_spans(out.data, fb_after, where="after")
        for (_k, _sm, payload), span, e in zip(want, spans, fb_after.entries, strict=True):
            assert out.data[span.offset + 64 : span.offset + 64 + len(payload)] == payload
            assert e.stored_size == len(payload)
        # Freed bytes, from the kept entries' end to the original container's end, are zero.
        end_after = fb_after.offset + fb_after.size
        assert out.data[end_after : fb_before.offset + fb_before.size] == bytes(fb_before.size - fb_after.size)
    # Outside the containers nothing moved.
    spans_before = [(fb.offset, fb.offset + fb.size) for fb in before.fatbins]
    for i, (a, b) in enumerate(zip(data, out.data, strict=True)):
        if a != b:
            assert any(s <= i < e for s, e in spans_before), f"byte {i:#x} outside every container changed"
    assert out.dropped_bytes == sum(fb.size for fb in before.fatbins) - sum(fb.size for fb in after.fatbins)


def test_a_module_without_code_for_the_request_becomes_an_empty_container() -> None:
    data = _so([[("sass", 100, b"\x01" * 64, False)], [("sass", 90, b"\x02" * 64, False)]])
    out = slim_elf(data, "lib.so", SlimRequest(ccs=(CC(9, 0),)))
    first, second = read_elf(out.data, "after").fatbins
    assert first.entries == () and first.size == 16
    assert [e.arch for e in second.entries] == ["90"]
    assert [(d.kind, d.arch, d.bytes) for d in out.dropped] == [("sass", "100", 128)]


def test_ptx_serves_a_cc_without_sass_and_newest_keeps_it_beside_sass() -> None:
    ents = [("sass", 80, b"\x01" * 64, False), ("sass", 90, b"\x02" * 64, False), ("ptx", 90, b"\x03" * 64, False)]
    only_sass = slim_elf(_so([ents]), "x", SlimRequest(ccs=(CC(9, 0),)))
    assert only_sass.kept == (("sass", "90"),)
    with_ptx = slim_elf(_so([ents]), "x", SlimRequest(ccs=(CC(9, 0),), ptx="newest"))
    assert with_ptx.kept == (("sass", "90"), ("ptx", "90"))
    # 10.0 has no cubin here: the driver would JIT the PTX, so the PTX is what serves it
    jit = slim_elf(_so([ents]), "x", SlimRequest(ccs=(CC(10, 0),)))
    assert jit.kept == (("ptx", "90"),)


def test_nothing_to_drop_leaves_the_bytes_identical() -> None:
    data = _so([[("sass", 90, b"\x02" * 64, False)]])
    out = slim_elf(data, "x", SlimRequest(ccs=(CC(9, 0),)))
    assert out.data == data and out.dropped == ()


def test_empty_request_is_refused() -> None:
    with pytest.raises(BadInputError, match="no compute capability"):
        SlimRequest(ccs=())


def test_keep_mask_keeps_lto_ir_and_unknown_kinds() -> None:
    fb = read_elf(
        elf(sections={".nv_fatbin": fatbin([fatbin_entry(kind="lto-ir", sm=90), fatbin_entry(kind=5, sm=80)])}), "x"
    ).fatbins[0]
    assert keep_mask(fb.entries, SlimRequest(ccs=(CC(7, 5),))) == (True, True)


def test_malformed_fatbin_is_bad_input_naming_the_file() -> None:
    broken = elf(sections={".nv_fatbin": fatbin([fatbin_entry(sm=90)], fat_size=4096)})
    with pytest.raises(BadInputError, match="lib.so"):
        slim_elf(broken, "lib.so", SlimRequest(ccs=(CC(9, 0),)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cs=containers(), flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=6))
def test_hostile_bytes_are_bad_input_or_a_same_size_result(
    cs: list[list[tuple[str, int, bytes, bool]]], flips: list[tuple[int, int]]
) -> None:
    """Corrupted fatbin headers (sizes, kinds, magic): a BadInputError naming the file, never another exception,
    and never a result of another length."""
    data = bytearray(_so(cs))
    fat = read_elf(bytes(data), "x").fatbins
    lo = fat[0].offset if fat else 0
    hi = max((fb.offset + fb.size for fb in fat), default=len(data))
    for pos, value in flips:
        data[lo + pos % max(hi - lo, 1)] = value
    try:
        out = slim_elf(bytes(data), "lib.so", SlimRequest(ccs=(CC(9, 0),)))
    except BadInputError as e:
        assert "lib.so" in str(e)
    else:
        assert len(out.data) == len(data)
