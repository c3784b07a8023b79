"""Where the index reader looks: pip's own indexes, read from pip's configuration files and PIP_* variables as
`pip install` reads them (or SLIMWHEEL_INDEX_URL), so names of private projects go where pip would send them."""

from __future__ import annotations

import configparser
import contextlib
import os
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from slimwheel.envvars import parse_bool
from slimwheel.errors import BadInputError
from slimwheel.pypindex.client import cut

DEFAULT_INDEX = "https://pypi.org/simple/"


@dataclass(frozen=True, kw_only=True)
class IndexConfig:
    """The indexes a lookup reads, as pip would install from them: `urls`, the index first and pip's extra indexes
    after it (pip merges their listings, and so does `IndexLookup`); `source` says where they were set (for
    messages); `redirect_hosts`: hosts a redirect may lead to besides the one asked; `problem`: why no index may be
    read (pip configured with `no-index`, an unreadable pip configuration, no HTTP(S) index): then every lookup fails
    with it. `skipped`: pip's indexes that are not HTTP(S) (`file:` mirrors), which are not read: a project is then
    judged from the HTTP(S) indexes alone."""

    urls: tuple[str, ...]
    source: str
    redirect_hosts: frozenset[str] = frozenset()
    problem: str = ""
    skipped: tuple[str, ...] = ()  # pip's indexes that are not HTTP(S) (a file: mirror): not read


def pip_config_files(env: Mapping[str, str], *, prefix: str | None = None, home: str | None = None) -> list[Path]:
    """pip's configuration files on Linux, lowest precedence first, as pip (`configuration.py`) loads them: the
    global ones (`$XDG_CONFIG_DIRS/pip/pip.conf`, default /etc/xdg, then /etc/pip.conf), the user's (`~/.pip/pip.conf`,
    then `$XDG_CONFIG_HOME/pip/pip.conf`; skipped when PIP_CONFIG_FILE names a file that exists), the environment's
    (`<prefix>/pip.conf`), then PIP_CONFIG_FILE. PIP_CONFIG_FILE=/dev/null: none at all."""
    own = env.get("PIP_CONFIG_FILE") or ""
    if own == os.devnull:
        return []
    home = home if home is not None else env.get("HOME") or os.path.expanduser("~")
    dirs = [d for d in (env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep) if d]
    files = [Path(d, "pip", "pip.conf") for d in dirs] + [Path("/etc/pip.conf")]
    if not (own and os.path.exists(own)):
        config_home = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        files += [Path(home, ".pip", "pip.conf"), Path(config_home, "pip", "pip.conf")]
    files.append(Path(sys.prefix if prefix is None else prefix, "pip.conf"))
    if own:
        files.append(Path(own))
    return files


def _pip_settings(texts: Sequence[tuple[str, str]], env: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """pip's `index-url`, `extra-index-url` and `no-index` for `pip install`, each with where it was set: the files
    (path, text) in order, each overriding the ones before, `[global]` under `[install]`, then PIP_* variables."""
    found: dict[str, tuple[str, str]] = {}
    keys = ("index-url", "extra-index-url", "no-index")
    for section in ("global", "install"):
        for path, text in texts:
            parser = configparser.RawConfigParser()
            try:
                parser.read_string(text, source=path)
            except configparser.Error as exc:
                raise BadInputError(f"{path}: pip cannot read it either ({str(exc).splitlines()[0]})") from None
            if parser.has_section(section):
                for key, value in parser.items(section):
                    if key.replace("_", "-") in keys:
                        found[key.replace("_", "-")] = (value, f"{path} [{section}]")
    for key in keys:
        var = "PIP_" + key.upper().replace("-", "_")
        if env.get(var):
            found[key] = (env[var], var)
    return found


def index_config(env: Mapping[str, str] | None = None, *, files: Sequence[Path] | None = None) -> IndexConfig:
    """The indexes to read: SLIMWHEEL_INDEX_URL (one URL: that index alone), else pip's configuration as `pip
    install` reads it (`pip_config_files`, PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_NO_INDEX), else PyPI. A private
    index set for pip is thus never bypassed for public PyPI."""
    e = os.environ if env is None else env
    redirect_hosts = frozenset((e.get("SLIMWHEEL_INDEX_REDIRECT_HOSTS") or "").lower().split())
    own = (e.get("SLIMWHEEL_INDEX_URL") or "").strip()
    if own:
        return IndexConfig(urls=(slash(own),), source="SLIMWHEEL_INDEX_URL", redirect_hosts=redirect_hosts)
    texts = []
    try:
        for path in pip_config_files(e) if files is None else files:
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                texts.append((str(path), path.read_text("utf-8", "replace")))
        settings = _pip_settings(texts, e)
        no_index = parse_bool(settings["no-index"][0], name="no-index") if "no-index" in settings else None
    except (BadInputError, OSError) as exc:
        problem = f"pip's configuration cannot be read, so the index pip uses is unknown: {exc}"
        return IndexConfig(urls=(), source="pip's configuration", problem=problem)
    if no_index:
        where = settings["no-index"][1]
        return IndexConfig(urls=(), source=where, problem=f"pip is configured to read no index ({where})")
    index, source = settings.get("index-url", (DEFAULT_INDEX, "the default"))
    extra, extra_source = settings.get("extra-index-url", ("", ""))
    every = tuple(dict.fromkeys(slash(u) for u in (index.strip(), *extra.split()) if u))
    urls = tuple(u for u in every if is_http(u))
    skipped = tuple(u for u in every if not is_http(u))
    if extra_source:
        source = f"{source}; extra indexes: {extra_source}"
    if not urls:
        problem = f"pip's indexes ({', '.join(map(cut, every)) or 'none'}) are not read over HTTP(S) ({source})"
        return IndexConfig(urls=(), source=source, problem=problem, skipped=skipped)
    return IndexConfig(urls=urls, source=source, redirect_hosts=redirect_hosts, skipped=skipped)


def is_http(url: str) -> bool:
    try:
        return urllib.parse.urlsplit(url).scheme.lower() in ("http", "https")
    except ValueError:  # "http://[::1/": no usable URL at all
        return False


def slash(url: str) -> str:
    return url if url.endswith("/") else url + "/"
