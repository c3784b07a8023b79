"""Dependency rules: which CUDA major a wheel is for, what repair leaves out and requires, and the one rule that
every library a wheel needs is accounted for. `check` judges a wheel with `dependency_problems`; `repair` judges its
own output with the same function before writing it, so repair never emits a wheel that check fails.

The parts: `bounds` (the CUDA major's libraries and the requirement bounds repair writes), `installs` (where the wheel
installs and which requirements hold there), `policy` (the manylinux allow-list), `providers` (the provider rules),
`resolve` (for every library of every file, who provides it and how: typed values), `verdict` (the verdict and its
notes, worded from the resolution alone). A new provider rule is a function in `resolve` (a `How`) and its wording in
`verdict`; repair plans from the resolution (`Resolved.extras`, `only_optional`).
"""

from __future__ import annotations

from slimwheel.deps.bounds import (
    Floor,
    admits_only_major,
    exclusions,
    floor_for,
    needed_runtime_libs,
    requirement_for,
    requirements,
    satisfiable,
    wrong_major,
)
from slimwheel.deps.installs import Installs, Requirements
from slimwheel.deps.policy import SYSTEM_LOADERS, SystemPolicy, known_platform, policy_data, system_policy
from slimwheel.deps.providers import cxx_runtime_problem, install_requirement, plugins
from slimwheel.deps.resolve import Fault, FileResolution, How, Resolution, Resolved, Use, resolve
from slimwheel.deps.verdict import (
    DependencyVerdict,
    ExtraProvision,
    dependency_problems,
    extra_notes,
    word,
)

__all__ = [
    "SYSTEM_LOADERS",
    "DependencyVerdict",
    "ExtraProvision",
    "Fault",
    "FileResolution",
    "Floor",
    "How",
    "Installs",
    "Requirements",
    "Resolution",
    "Resolved",
    "SystemPolicy",
    "Use",
    "admits_only_major",
    "cxx_runtime_problem",
    "dependency_problems",
    "exclusions",
    "extra_notes",
    "floor_for",
    "install_requirement",
    "known_platform",
    "needed_runtime_libs",
    "plugins",
    "policy_data",
    "requirement_for",
    "requirements",
    "resolve",
    "satisfiable",
    "system_policy",
    "word",
    "wrong_major",
]
