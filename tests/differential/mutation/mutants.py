"""One-line bugs seeded into the reading and rule layers, to measure the differential suite.

Each mutant is (file, the line's text as it is, the line's text with the bug, what the bug is).
`python -m tests.differential.mutation.run` applies them one at a time and runs the suite;
a mutant is killed when the suite fails. Written by hand from the kinds of slip that have
happened or could (an off-by-one on a cap, a folded comparison, a dropped branch).
"""

from __future__ import annotations

MUTANTS: list[tuple[str, str, str, str]] = [
    # scalars.py: how Go reads plain scalars
    (
        "kubectl_gpu/scalars.py",
        "return None  # Python's int() and float() read",
        "pass  # Python's int() and float() read",
        "accept non-ASCII digits",
    ),
    (
        "kubectl_gpu/scalars.py",
        '_SIGN_DIGIT = re.compile(r"[-+]?\\.?[0-9]")',
        '_SIGN_DIGIT = re.compile(r"[-+]?[0-9]")',
        "no .4e1 numbers",
    ),
    (
        "kubectl_gpu/scalars.py",
        '_GO_BOOLEANS = {"y": True, "Y": True, "n": False, "N": False}',
        '_GO_BOOLEANS = {"Y": True, "n": False, "N": False}',
        "y is not a boolean",
    ),
    (
        "kubectl_gpu/scalars.py",
        "_INT64 = (-(2**63), 2**64 - 1)",
        "_INT64 = (-(2**63), 2**63 - 1)",
        "uint64 range lost",
    ),
    (
        "kubectl_gpu/scalars.py",
        '        return text if pyyaml_tag == "int" else UNCHANGED  # e.g. 1:30',
        "        return UNCHANGED  # e.g. 1:30",
        "1:30 read as base 60",
    ),
    (
        "kubectl_gpu/scalars.py",
        "    return value if value < 2**bits else None",
        "    return value if value <= 2**bits else None",
        "ParseUint off by one",
    ),
    (
        "kubectl_gpu/scalars.py",
        "            digits, base = text[1:], 8",
        "            digits, base = text[1:], 10",
        "leading 0 decimal",
    ),
    (
        "kubectl_gpu/scalars.py",
        '            if saw != "0":',
        '            if saw == "!":',
        "underscore after a prefix-less start",
    ),
    (
        "kubectl_gpu/scalars.py",
        '        return "true" if text.lower() in ("yes", "true", "on") else "false"',
        "        return text",
        "keys on/yes kept as text",
    ),
    (
        "kubectl_gpu/scalars.py",
        '    if pyyaml_tag == "null":\n        return None',
        '    if pyyaml_tag == "null":\n        return "null"',
        "null key accepted",
    ),
    # documents/: the YAML loader
    (
        "kubectl_gpu/documents/conversion.py",
        "            for source in reversed(sources):",
        "            for source in sources:",
        "merge list: the later mapping wins",
    ),
    (
        "kubectl_gpu/documents/parsing.py",
        '        if "duplicate anchor" in str(e) and loader',
        '        if "duplicate anchorX" in str(e) and loader',
        "a redefined anchor refused",
    ),
    (
        "kubectl_gpu/documents/conversion.py",
        '    if tag == "float" and text.lstrip("+-").lower() in (".inf", ".nan"):',
        '    if tag == "float" and text.lower() in (".inf",):',
        "only +.inf refused",
    ),
    (
        "kubectl_gpu/documents/conversion.py",
        "            and not self._tagged(node)",
        "            and True",
        "explicit tags dropped",
    ),
    (
        "kubectl_gpu/documents/conversion.py",
        "            if key in first_line and id(pair) not in merged:",
        "            if key in first_line:",
        "merged keys reported as duplicates",
    ),
    (
        "kubectl_gpu/documents/conversion.py",
        "                pairs.append((key, value))\n                continue",
        "                pairs.insert(0, (key, value))\n                continue",
        "explicit keys always lose to merges",
    ),
    (
        "kubectl_gpu/documents/conversion.py",
        '        if tag == "bool" and node.value.lower() in _YAML11_BOOLEANS:',
        "        if False:",
        "no ambiguous-boolean warning (warning only)",
    ),
    # validation/: which documents count
    (
        "kubectl_gpu/validation/__init__.py",
        "        first = KINDS.get(reports[0].kind) if reports else None",
        "        first = None",
        "second documents validated",
    ),
    (
        "kubectl_gpu/validation/__init__.py",
        "                found = before(docs, found)",
        "                pass",
        "loader errors in ignored documents kept",
    ),
    # sharing/reading.py: encoding/json's key matching
    (
        "kubectl_gpu/sharing/reading.py",
        "        lower = char.lower() if len(char.lower()) == 1 else char",
        "        lower = char",
        "no Unicode folding",
    ),
    (
        "kubectl_gpu/sharing/reading.py",
        "    for key, value in sorted(pairs, key=lambda pair: str(pair[0])):",
        "    for key, value in pairs:",
        "spellings in written order",
    ),
    (
        "kubectl_gpu/sharing/reading.py",
        "            continue  # null leaves a Go struct field unset",
        "            result[name] = None; continue",
        "null is a value",
    ),
    (
        "kubectl_gpu/sharing/reading.py",
        "    return {k: v for k, v in body.items() if not (v is None and k in _BLOCK_OPTIONS)}",
        "    return dict(body)",
        "null block options kept",
    ),
    (
        "kubectl_gpu/sharing/reading.py",
        '        del result["version"]  # upstream: an empty version means v1',
        "        pass",
        "empty version refused",
    ),
    (
        "kubectl_gpu/sharing/reading.py",
        "            merged = [pair for v in values for pair in v.items()]",
        "            merged = list(values[-1].items())",
        "two spellings: only the last one read",
    ),
    # sharing rules
    (
        "kubectl_gpu/sharing/strategies.py",
        "MPS_MAX_REPLICAS = 48",
        "MPS_MAX_REPLICAS = 49",
        "MPS cap off by one",
    ),
    (
        "kubectl_gpu/sharing/strategies.py",
        "    if replicas < MIN_REPLICAS:",
        "    if replicas < MIN_REPLICAS - 1:",
        "replicas: 1 accepted",
    ),
    (
        "kubectl_gpu/sharing/names.py",
        "MAX_RESOURCE_NAME_LENGTH = 63",
        "MAX_RESOURCE_NAME_LENGTH = 64",
        "name length off by one",
    ),
    (
        "kubectl_gpu/sharing/devices.py",
        "    if count is not None and count <= 0:",
        "    if count is not None and count < 0:",
        "devices: 0 accepted",
    ),
    (
        "kubectl_gpu/sharing/flags.py",
        '    if value == "infinite":',
        '    if value == "Infinite":',
        "infinite sleep interval refused",
    ),
    # mig: device filters and specs
    (
        "kubectl_gpu/mig/selection.py",
        "    values = [scalars.go_parse_uint(part, 32) for part in parts]",
        "    values = [scalars.go_parse_uint(part, 32) for part in parts[:1]]",
        "subsystem half ignored",
    ),
    (
        "kubectl_gpu/mig/selection.py",
        "        return self.subsystem_id is None or self.subsystem_id == subsystem_id",
        "        return True",
        "subsystem never compared",
    ),
    (
        "kubectl_gpu/mig/selection.py",
        "    if read is not None and read[0] >> 16:",
        "    if read is not None:",
        "a filter naming device 0 only warned",
    ),
    (
        "kubectl_gpu/mig/spec.py",
        '_NULL_MEANS = {"mig-devices": None, "device-filter": None, "mig-enabled": False}',
        '_NULL_MEANS = {"mig-devices": None, "device-filter": None}',
        "null mig-enabled not false",
    ),
    # dra/sharing.py: the driver's reading of opaque configs
    (
        "kubectl_gpu/dra/sharing.py",
        "    if value > 100:",
        "    if value > 101:",
        "thread percentage cap off by one",
    ),
    (
        "kubectl_gpu/dra/sharing.py",
        '    if wrong in sharing and wrong in _FIELDS[f"{kind}.sharing"] and kind == "GpuConfig":',
        '    if wrong in sharing and wrong in _FIELDS[f"{kind}.sharing"]:',
        "MigDeviceConfig mismatch refused",
    ),
    (
        "kubectl_gpu/dra/sharing.py",
        "        if str(key).isdigit() and devices is not None and int(key) >= devices:",
        "        if str(key).isdigit() and devices is not None and int(key) > devices:",
        "device index off by one",
    ),
    (
        "kubectl_gpu/dra/sharing.py",
        "    if not active or quantity.whole_mebibytes(parsed) > 0:",
        "    if quantity.whole_mebibytes(parsed) > 0:",
        "inactive limits validated",
    ),
    # cel.py: doctor's CEL evaluation
    (
        "kubectl_gpu/cel.py",
        "    if isinstance(value, bool):\n        return celtypes.BoolType(value)",
        "    if False:\n        return celtypes.BoolType(value)",
        "booleans as ints",
    ),
    (
        "kubectl_gpu/cel.py",
        "        return super().__getitem__(key) if key in self else celtypes.MapType()",
        "        return super().__getitem__(key)",
        "missing domain is an error",
    ),
    (
        "kubectl_gpu/cel.py",
        "        return celtypes.BoolType(float(a) == float(b))",
        "        return celtypes.BoolType(type(a) is type(b) and a == b)",
        "1 == 1.0 is false",
    ),
]
