"""Resource names in a device-plugin config: how the device plugin normalises them, whether
it accepts them, and the rules about names.

Owns the `nvidia.com/` prefix, the length and RFC 1123 format upstream enforces, the finding
for a name it rejects, and the top-level `resources` block (custom names the plugin validates
and then ignores). Must not judge anything but names: replicas, devices and strategies belong
to the sharing blocks' rules. Pure: standard library and kubectl_gpu.findings only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from kubectl_gpu.findings import Finding, Path
from kubectl_gpu.sharing import catalogue

RESOURCE_PREFIX = "nvidia.com/"
MAX_RESOURCE_NAME_LENGTH = 63
SHARED_SUFFIX = ".shared"
DEFAULT_RESOURCE = "nvidia.com/gpu"

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1123_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def normalise_resource_name(name: str) -> str:
    """The fully-qualified name the device plugin uses: a bare `gpu` becomes `nvidia.com/gpu`.

    Like upstream, any name not starting with `nvidia.com/` gets the prefix, so a foreign
    prefix such as `example.com/gpu` becomes the invalid `nvidia.com/example.com/gpu`.
    """
    return name if name.startswith(RESOURCE_PREFIX) else RESOURCE_PREFIX + name


def upstream_error(name: str) -> str | None:
    """The device plugin's error for a resource name, or None when it accepts the name."""
    full = normalise_resource_name(name)
    if len(full) > MAX_RESOURCE_NAME_LENGTH:
        limit = MAX_RESOURCE_NAME_LENGTH
        return f"fully-qualified resource name must be {limit} characters or less: {full}"
    if not _DNS1123_SUBDOMAIN.fullmatch(full[len(RESOURCE_PREFIX) :]):
        return f"incorrect format for resource name '{full}': [{_DNS1123_MESSAGE}]"
    return None


def valid_name(name: object) -> str | None:
    """The normalised name when upstream accepts it, else None."""
    if isinstance(name, str) and upstream_error(name) is None:
        return normalise_resource_name(name)
    return None


def check_name(name: object, path: Path) -> Iterator[Finding]:
    """The finding for a name the device plugin rejects; nothing for a name of the wrong type."""
    if not isinstance(name, str):
        return  # missing or not a string: the schema reports it
    upstream = upstream_error(name)
    full = normalise_resource_name(name)
    if upstream is None:
        return
    if "/" in name and not name.startswith(RESOURCE_PREFIX):
        yield catalogue.find(
            "sharing.resource-name-prefix", path, name=name, full=full, upstream=upstream
        )
    elif len(full) > MAX_RESOURCE_NAME_LENGTH:
        yield catalogue.find("sharing.resource-name-too-long", path, upstream=upstream)
    else:
        yield catalogue.find("sharing.resource-name-format", path, upstream=upstream)


def check_custom_resources(resources: Mapping[str, Any]) -> Iterator[Finding]:
    """The top-level `resources` block: its names, and that the plugin ignores it."""
    in_use = False
    for group in ("gpus", "mig"):
        entries = resources.get(group)
        if isinstance(entries, list):
            in_use = in_use or bool(entries)
            for index, entry in enumerate(entries):
                name = entry.get("name") if isinstance(entry, Mapping) else None
                yield from check_name(name, ("resources", group, index, "name"))
    if in_use:
        log = "Customizing the 'resources' field is not yet supported in the config. Ignoring..."
        instead = "advertises its default resource names anyway"
        yield catalogue.find(
            "sharing.resources-ignored",
            ("resources",),
            at_key=True,
            field="the top-level resources block",
            instead=instead,
            log=log,
        )
