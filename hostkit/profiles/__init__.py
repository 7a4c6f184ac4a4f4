"""Declarative tuning profiles: shipped YAML (``bare-metal-inference``, ``virtual-guest`` and its
VMware specialization ``vmware-guest``, ``baseline``) or a path to a YAML file; ``extends`` chains;
validated on load."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from hostkit.core.sysroot import excerpt
from hostkit.errors import BadInput
from hostkit.jsonfile import check_name, read_text
from hostkit.profiles.schema import PLAN_OVERRIDES, SCHEMA, defaults, merge, validate
from hostkit.yamlfile import parse_yaml

DEFAULT_PROFILE = "bare-metal-inference"
MAX_EXTENDS = 16  # profiles extending one another: deeper than any real chain, far from the recursion limit


def shipped() -> list[str]:
    d = resources.files("hostkit.profiles")
    return sorted(p.name[:-4] for p in d.iterdir() if p.name.endswith(".yml"))


def _read(ref: str) -> tuple[dict, str]:
    if not isinstance(ref, str) or not ref:
        raise BadInput(f"a profile is a name or a file, got {type(ref).__name__} {excerpt(ref)}")
    if ref in shipped():
        text = resources.files("hostkit.profiles").joinpath(f"{ref}.yml").read_text()
        source = f"profile {ref}"
    else:
        p = Path(check_name(ref, "profile"))
        if not p.exists():
            raise BadInput(
                f"unknown profile {excerpt(ref)}: not a shipped profile ({', '.join(shipped())}) nor a YAML file"
            )
        text = read_text(p)
        source = f"profile {p}"
    data = parse_yaml(text, source)
    if not isinstance(data, dict):
        raise BadInput(f"{source} must be a YAML mapping")
    return data, source


def load_profile(ref: str | None = None, _seen: tuple = ()) -> dict:
    """The fully resolved profile: schema defaults < extended profile < this one."""
    ref = ref or DEFAULT_PROFILE
    if len(_seen) >= MAX_EXTENDS:
        raise BadInput(
            f"profile {excerpt(ref)}: more than {MAX_EXTENDS} profiles extend one another "
            f"(chain: {' -> '.join(map(str, _seen[:3]))} -> ...)"
        )
    if isinstance(ref, str) and ref in _seen:
        raise BadInput(f"profile {ref!r} extends itself (chain: {' -> '.join(_seen + (ref,))})")
    data, source = _read(ref)
    data = validate(data, SCHEMA, source=source)
    base = load_profile(data["extends"], _seen + (ref,)) if data.get("extends") else defaults()
    merged = merge(base, data)
    merged["name"] = data.get("name") or ref
    merged["extends"] = data.get("extends")
    return merged


def for_host(name: str, hostvars: dict, profile: str | None = None) -> tuple[dict, dict]:
    """An inventory host's profile and pinned plan values: ``profile`` (the command line's) or the
    host's ``hostkit_profile``, then its ``hostkit_overrides`` (see :func:`apply_overrides`)."""
    return apply_overrides(
        load_profile(profile or hostvars.get("hostkit_profile")),
        hostvars.get("hostkit_overrides"),
        source=f"{name}: hostkit_overrides",
    )


def apply_overrides(profile: dict, overrides, source: str = "hostkit_overrides") -> tuple[dict, dict]:
    """Split inventory overrides into profile values and pinned plan values; validate both."""
    if overrides is None:
        return profile, {}
    if not isinstance(overrides, dict):
        raise BadInput(f"{source} must be a mapping, got {type(overrides).__name__}")
    plan_part = {k: v for k, v in overrides.items() if k in PLAN_OVERRIDES}
    profile_part = {k: v for k, v in overrides.items() if k not in PLAN_OVERRIDES}
    plan_part = validate(plan_part, PLAN_OVERRIDES, source=source)
    profile_part = validate(
        profile_part, {k: v for k, v in SCHEMA.items() if k not in ("name", "extends")}, source=source
    )
    return merge(profile, profile_part), plan_part
