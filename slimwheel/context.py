"""The resolved build: configuration, CUDA release, toolkit and plan, decided once and handed down.

`slimwheel build`, `plan`, `prune` and `container` all start here, so a release is parsed once (in `config`), "auto"
is resolved once (`Config.fallback_release`, or the toolkit found), and the plan is made once, from the toolkit's own
target list when there is a toolkit and from slimwheel's release table when there is none yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from slimwheel.config import Config
from slimwheel.cuda.versions import STATIC_CUDA, CudaVersion
from slimwheel.fsutil import cache_dir
from slimwheel.plan import BuildPlan, make_plan, make_plan_for_release
from slimwheel.toolkit import ensure_toolkit, find_toolkit
from slimwheel.toolkit.model import Toolkit


@dataclass(frozen=True, kw_only=True)
class BuildContext:
    config: Config
    release: CudaVersion  # the toolkit's, or the one a build would assemble
    toolkit: Toolkit | None  # None: not here yet (a dry run, `slimwheel plan`, a container's toolkit)
    plan: BuildPlan
    origin: str  # where the targets come from, for people


def toolkit_for(cfg: Config, env: Mapping[str, str], *, assemble: bool) -> Toolkit | None:
    """The toolkit of a run. `assemble`: find one and check it, or assemble the fallback release (a build);
    otherwise only look for one already here (`plan`, dry runs: nothing is downloaded)."""
    root = Path(cfg.toolkit) if cfg.toolkit else None
    if assemble:
        return ensure_toolkit(cfg.cuda, root=root, env=env, fallback=cfg.fallback_release())
    return find_toolkit(cfg.cuda, root=root, env=env)


def static_toolkit_for(cfg: Config, env: Mapping[str, str]) -> Toolkit:
    """The toolkit whose static libraries and nvprune a prune uses: the configured release, else the static link's
    (only a full toolkit has them, whatever the link setting says; a PyPI CUDA 13 has neither)."""
    root = Path(cfg.toolkit) if cfg.toolkit else None
    return ensure_toolkit(cfg.cuda or STATIC_CUDA, root=root, env=env)


def with_toolkit(cfg: Config, env: Mapping[str, str], tk: Toolkit | None) -> BuildContext:
    """The context once the toolkit is known (or known to be absent): the plan, made once."""
    if tk is not None:
        return BuildContext(
            config=cfg,
            release=tk.version,
            toolkit=tk,
            plan=make_plan(cfg, tk),
            origin=f"CUDA {tk.version} ({tk.source}) at {tk.root}; targets from its nvcc",
        )
    release = cfg.fallback_release()
    return BuildContext(
        config=cfg,
        release=release,
        toolkit=None,
        plan=make_plan_for_release(cfg, release),
        origin=f"no CUDA {release} toolkit installed: targets from slimwheel's table for CUDA {release} "
        f"(`slimwheel toolkit --cuda {release}` assembles one in {cache_dir(dict(env)) / 'toolkits'})",
    )


def resolve(cfg: Config, env: Mapping[str, str], *, assemble: bool) -> BuildContext:
    return with_toolkit(cfg, env, toolkit_for(cfg, env, assemble=assemble))
