"""MIG profile names: the grammar of `1g.10gb`, `1c.3g.40gb`, `1g.10gb+me` and `1g.24gb-me`.

Owns turning a profile name into a `MigProfile` value, and the wording of what is wrong with
a name. What mig-parted itself rejects when it reads a config follows go-nvlib's profile
parser (as vendored in mig-parted v0.15.0) and keeps its error strings; on top of that come
the rules every real GPU obeys (slice counts, which compute-instance sizes a GPU instance
offers, the attributes NVML knows; docs/upstream-facts.md M4.3). Must not know which GPU model
offers which profile, nor how instances fit on a GPU (that is the geometry's job).
Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

# GPU-instance sizes (in compute slices) NVML offers on MIG-capable GPUs, and the
# compute-instance sizes each offers: C <= G, and C < G only while 2C <= G + 1.
COMPUTE_SLICES_BY_GPU_SLICES: dict[int, frozenset[int]] = {
    7: frozenset({1, 2, 3, 4, 7}),
    4: frozenset({1, 2, 4}),
    3: frozenset({1, 2, 3}),
    2: frozenset({1, 2}),
    1: frozenset({1}),
}
ATTRIBUTES = ("me", "me.all", "gfx")  # +me: media engines; +me.all: all of them; +gfx: graphics
NEGATIVE_ATTRIBUTES = ("me",)  # -me: no media engine
MEDIA_EXTENSIONS = "me"
RESOURCE_PREFIX = "nvidia.com/mig-"

_DIGITS = re.compile(r"[0-9]+")
_MAX_GO_INT = 2**63 - 1  # larger numbers fail Go's strconv.Atoi
_NOT_GO_SPACE = frozenset("\x1c\x1d\x1e\x1f")  # Python calls these whitespace, Go does not


class ProfileError(ValueError):
    """A MIG profile name is wrong.

    `upstream` is True when mig-parted itself rejects the name while reading the config
    (the message is then its own); False when mig-parted accepts the name but no GPU has
    such a profile, which mig-parted only finds out on the node.
    """

    def __init__(self, message: str, *, profile: str, upstream: bool) -> None:
        super().__init__(message)
        self.message = message
        self.profile = profile
        self.upstream = upstream


@dataclasses.dataclass(frozen=True)
class MigProfile:
    """A parsed MIG profile: C compute slices of a G-slice GPU instance with GB of memory."""

    compute_slices: int
    gpu_slices: int
    memory_gb: int
    attributes: tuple[str, ...] = ()
    negative_attributes: tuple[str, ...] = ()

    @property
    def base(self) -> str:
        """The name without attributes, e.g. `1g.10gb` for `1g.10gb+me`."""
        gpu_instance = f"{self.gpu_slices}g.{self.memory_gb}gb"
        if self.is_compute_instance:
            return f"{self.compute_slices}c.{gpu_instance}"
        return gpu_instance

    @property
    def name(self) -> str:
        """The name as mig-parted and NVML spell it (`7c.7g.80gb` becomes `7g.80gb`)."""
        if self.attributes:
            return f"{self.base}+{','.join(self.attributes)}"
        if self.negative_attributes:
            return f"{self.base}-{','.join(self.negative_attributes)}"
        return self.base

    @property
    def resource_name(self) -> str:
        """The extended resource the device plugin advertises a device of this profile under,
        with `migStrategy: mixed`.

        v0.19.3 makes one resource per GPU-instance profile (C == G) in NVML's profile order
        and gives a MIG device the first whose name occurs anywhere in the device's profile
        (`ResourcePattern.Matches` is an unanchored regexp): `1c.3g.40gb` is counted as
        `nvidia.com/mig-3g.40gb` and `1g.10gb+me` as `nvidia.com/mig-1g.10gb`, the plain
        profile of its size coming first (docs/upstream-facts.md P4).
        """
        return f"{RESOURCE_PREFIX}{self.gpu_slices}g.{self.memory_gb}gb"

    @property
    def is_compute_instance(self) -> bool:
        """True for an `Nc.` profile that uses only part of its GPU instance."""
        return self.compute_slices < self.gpu_slices

    @property
    def gpu_instance(self) -> MigProfile:
        """The GPU-instance profile this one is carved from (itself when C == G)."""
        return dataclasses.replace(self, compute_slices=self.gpu_slices)

    @property
    def has_media_extensions(self) -> bool:
        """True for a `+me` profile: the one GPU instance per GPU holding the media engines."""
        return MEDIA_EXTENSIONS in self.attributes

    def __str__(self) -> str:
        return self.name


def parse(name: str) -> MigProfile:
    """Parse a profile name such as `1g.10gb`, `1c.3g.40gb`, `1g.10gb+me` or `1g.24gb-me`.

    Raises ProfileError with mig-parted's wording for names it rejects, and with our own
    for names it accepts but that no GPU offers.
    """
    if name == "":
        raise ProfileError("profile is the empty string", profile=name, upstream=True)
    positive = name.split("+", 1)
    negative = name.split("-", 1)
    if len(positive) == 2 and len(negative) == 2:
        raise ProfileError(
            f"profile '{name}' contains both '+/-' attributes", profile=name, upstream=True
        )
    head, *tail = positive if len(positive) == 2 else negative
    compute, gpu, memory = _fields(name, head)
    attributes = _attributes(name, tail[0]) if tail else ()
    is_negative = bool(tail) and len(negative) == 2
    profile = MigProfile(
        compute_slices=compute,
        gpu_slices=gpu,
        memory_gb=memory,
        attributes=() if is_negative else attributes,
        negative_attributes=attributes if is_negative else (),
    )
    _check_real(name, profile)
    return profile


def _fields(name: str, head: str) -> tuple[int, int, int]:
    parts = head.split(".", 2)
    try:
        if len(parts) == 3:
            return _number(parts[0], "c"), _number(parts[1], "g"), _number(parts[2], "gb")
        if len(parts) == 2:
            gpu = _number(parts[0], "g")
            return gpu, gpu, _number(parts[1], "gb")
        raise ValueError("parsed wrong number of fields, expected 2 or 3")
    except ValueError as e:
        raise ProfileError(
            f"cannot parse fields of '{name}': {e}", profile=name, upstream=True
        ) from None


def _number(text: str, unit: str) -> int:
    # The '%d' is literal: go-nvlib's messages print the format, not a number.
    if _go_trim_space(text) != text:
        raise ValueError(f"leading or trailing spaces on '%d{unit}'")
    if not text.endswith(unit):
        raise ValueError(f"missing '{unit}' from '%d{unit}'")
    digits = text[: -len(unit)]
    significant = digits.lstrip("0")
    if not _DIGITS.fullmatch(digits) or len(significant) > 19 or int(digits) > _MAX_GO_INT:
        raise ValueError(f"malformed number in '%d{unit}'")
    return int(digits)


def _attributes(name: str, text: str) -> tuple[str, ...]:
    seen: list[str] = []
    for attribute in text.split(","):
        problem = _attribute_problem(attribute, seen)
        if problem:
            raise ProfileError(
                f"cannot parse attributes of '{name}': {problem}", profile=name, upstream=True
            )
        seen.append(attribute)
    return tuple(seen)


def _attribute_problem(attribute: str, seen: list[str]) -> str:
    # Same checks, in the same order, as go-nvlib's attribute parser.
    if attribute in seen:
        return "non unique attribute in list"
    if attribute == "":
        return "empty attribute in list"
    if _go_trim_space(attribute) != attribute:
        return "leading or trailing spaces in attribute"
    if attribute[0] in "0123456789":
        return "attribute begins with a number"
    if attribute[0] == "." or attribute[-1] == ".":
        return "attribute begins/ends with a dot"
    if any(not (c.isascii() and (c.isalnum() or c == ".")) for c in attribute):
        return "non alpha-numeric character or digit in attribute"
    return ""


def _go_trim_space(text: str) -> str:
    start, end = 0, len(text)
    while start < end and _is_go_space(text[start]):
        start += 1
    while end > start and _is_go_space(text[end - 1]):
        end -= 1
    return text[start:end]


def _is_go_space(char: str) -> bool:
    return char.isspace() and char not in _NOT_GO_SPACE


def _check_real(name: str, profile: MigProfile) -> None:
    problem = (
        _slices_problem(profile) or _memory_problem(profile) or _attribute_set_problem(profile)
    )
    if problem:
        raise ProfileError(
            f"'{name}' is not a MIG profile: {problem}", profile=name, upstream=False
        )


def _slices_problem(profile: MigProfile) -> str:
    g, c = profile.gpu_slices, profile.compute_slices
    allowed = COMPUTE_SLICES_BY_GPU_SLICES.get(g)
    if allowed is None:
        return f"a GPU instance has {_either(COMPUTE_SLICES_BY_GPU_SLICES)} slices, not {g} ({g}g)"
    if c > g:
        return f"a compute instance cannot have more slices ({c}c) than its GPU instance ({g}g)"
    if c not in allowed:
        return (
            f"a {g}g GPU instance offers compute instances of {_either(allowed)} slices, not {c}c"
        )
    return ""


def _either(numbers: Iterable[int]) -> str:
    ordered = [str(n) for n in sorted(numbers)]
    return ", ".join(ordered[:-1]) + " or " + ordered[-1] if len(ordered) > 1 else ordered[0]


def _memory_problem(profile: MigProfile) -> str:
    if profile.memory_gb < 1:
        return "memory must be at least 1gb"
    return ""


def _attribute_set_problem(profile: MigProfile) -> str:
    attributes = [f"+{a}" for a in profile.attributes] + [
        f"-{a}" for a in profile.negative_attributes
    ]
    if len(attributes) > 1:
        return f"no MIG profile has more than one attribute ({', '.join(attributes)})"
    unknown = [a for a in profile.attributes if a not in ATTRIBUTES] + [
        a for a in profile.negative_attributes if a not in NEGATIVE_ATTRIBUTES
    ]
    if unknown:
        sign = "+" if profile.attributes else "-"
        known = ATTRIBUTES if profile.attributes else NEGATIVE_ATTRIBUTES
        return (
            f"unknown attribute '{sign}{unknown[0]}' (known: {', '.join(sign + k for k in known)})"
        )
    return ""
