"""The YAML loader with the grammar of NVIDIA's Go reader (go.yaml.in/yaml/v2) where PyYAML's
pure-Python loader differs: directives, escapes, a redefined anchor, and the scanner's plain
scalars and directive values. Owns only the loader; choosing when to use it (a text that needs
it) is `parsing`'s. Imports PyYAML on first use.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.lru_cache(maxsize=1)
def loader() -> Any:
    """PyYAML's pure-Python safe loader with the grammar of Go's yaml.v2 where they differ.

    - a second `&name` replaces the first (PyYAML refuses the file);
    - only `%YAML 1.1` is read: 1.0 or 1.2 is "found incompatible YAML document", and a
      directive other than %YAML and %TAG is "found unknown directive name" (PyYAML reads
      any 1.x and ignores unknown directives);
    - the escapes of a double-quoted scalar are YAML 1.1's: `\\/` is "found unknown escape
      character", `\\'` is an apostrophe (PyYAML the other way round).
    """
    import yaml

    escapes = {k: v for k, v in yaml.SafeLoader.ESCAPE_REPLACEMENTS.items() if k != "/"}

    class GoLoader(_GoScanner, yaml.SafeLoader):
        ESCAPE_REPLACEMENTS = {**escapes, "'": "'"}  # type: ignore[misc]

        def compose_node(self, parent: Any, index: Any) -> Any:
            if not self.check_event(yaml.AliasEvent):
                event = self.peek_event()  # type: ignore[no-untyped-call]
                self.anchors.pop(event.anchor, None)
            return super().compose_node(parent, index)

        def process_directives(self) -> Any:
            version, handles = None, {}
            while self.check_token(yaml.DirectiveToken):
                token = self.get_token()  # type: ignore[no-untyped-call]
                if token.name == "YAML":
                    if version is not None:
                        _directive_error("found duplicate %YAML directive", token)
                    version = tuple(token.value)
                    if version != (1, 1):
                        _directive_error("found incompatible YAML document", token)
                elif token.name == "TAG":
                    handle, prefix = token.value
                    if handle in handles:
                        _directive_error("found duplicate %TAG directive", token)
                    handles[handle] = prefix
                else:
                    _directive_error("found unknown directive name", token)
            self.yaml_version = version
            self.tag_handles = {**self.DEFAULT_TAGS, **handles}
            return version, (dict(handles) or None)

    return GoLoader


class _GoScanner:
    """The scanner rules of Go's yaml.v2 where PyYAML's pure-Python scanner differs."""

    def scan_plain(self: Any) -> Any:
        token = super().scan_plain()  # type: ignore[misc]
        if self.flow_level and self.peek() == ":" and self.peek(1) in ",[]{}":
            # Go reads on past this colon (`{a:,}` is the key "a:"), PyYAML stops before
            # it: refused rather than read as another key than NVIDIA's.
            raise _scanner_error(
                "while scanning a plain scalar",
                token.start_mark,
                "found ':' before a flow indicator: NVIDIA's Go YAML reader makes the "
                "colon part of the text",
                self.get_mark(),
            )
        return token

    def scan_yaml_directive_value(self: Any, start_mark: Any) -> Any:
        # Go: blanks (tabs too) before the version, and nothing required after it
        # (`%YAML 1.1#c` is read; the rest of the line is a comment or an error).
        while self.peek() in " \t":
            self.forward()
        major = self.scan_yaml_directive_number(start_mark)
        if self.peek() != ".":
            raise _scanner_error(
                "while scanning a directive",
                start_mark,
                "expected a digit or '.'",
                self.get_mark(),
            )
        self.forward()
        return major, self.scan_yaml_directive_number(start_mark)

    def scan_directive_ignored_line(self: Any, start_mark: Any) -> None:
        while self.peek() in " \t":
            self.forward()
        super().scan_directive_ignored_line(start_mark)  # type: ignore[misc]


def _scanner_error(context: str, context_mark: Any, problem: str, problem_mark: Any) -> Exception:
    import yaml

    return yaml.scanner.ScannerError(context, context_mark, problem, problem_mark)


def _directive_error(problem: str, token: Any) -> None:
    import yaml

    raise yaml.parser.ParserError(
        "while reading a directive (NVIDIA's Go YAML reader knows only %YAML 1.1 and %TAG)",
        None,
        problem,
        token.start_mark,
    )
