"""The credentials a kubeconfig gives, read as kubectl reads them, and kept out of every message.

Owns three things the kubernetes client does differently from kubectl: a token's whitespace
(kubectl trims a `tokenFile`'s content: client-go's file token source calls `strings.TrimSpace`,
https://github.com/kubernetes/client-go/blob/master/transport/token_source.go; an inline `token`
is sent as written, and Go's HTTP client refuses one with a line break: docs/upstream-facts.md N7.1;
the Python client sends either as written, and http.client's refusal quotes the whole header),
the error of an exec credential plugin (the client logs it and goes on anonymously: N7.2), and
registering every credential loaded with `errors.keep_secret` so that no message prints it. Must
not send requests or decide anything about GPUs.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from kubectl_gpu import errors
from kubectl_gpu.errors import ClusterError

_SCHEMES = ("Bearer ", "Basic ")


def settle(configuration: Any, user: str, *, token_file: bool) -> None:
    """Read the loaded token as kubectl does, now and after every refresh (the client's
    refresh hook writes the loaded value back before each request): a `tokenFile`'s content
    trimmed of surrounding whitespace; an inline `token` sent without surrounding blanks (the
    server trims them), and refused with a line break or control character in it, as kubectl
    refuses it (Go's HTTP client will not send such a header). Register
    every credential as a secret."""
    errors.keep_secret(getattr(configuration, "password", None))
    _check(configuration, user, token_file)
    refresh = getattr(configuration, "refresh_api_key_hook", None)
    if refresh is None:
        return

    def refreshed(conf: Any) -> None:
        refresh(conf)
        _check(conf, user, token_file)
        conf.refresh_api_key_hook = refreshed  # the client's hook re-installs itself

    configuration.refresh_api_key_hook = refreshed


def _check(configuration: Any, user: str, token_file: bool) -> None:
    keys: dict[str, Any] = getattr(configuration, "api_key", None) or {}
    for name, value in list(keys.items()):
        if not isinstance(value, str):
            continue
        errors.keep_secret(value)
        scheme = next((s for s in _SCHEMES if value.startswith(s)), "")
        token = value[len(scheme) :]
        errors.keep_secret(token)
        # TrimSpace for a file; for an inline token only the blanks the API server itself
        # trims from the header (k8s.io/apiserver's bearer-token authenticator)
        token = token.strip() if token_file else token.strip(" \t")
        if all(c.isprintable() and not c.isspace() for c in token):
            keys[name] = f"{scheme}{token}"
            continue
        where = "its tokenFile holds" if token_file else "its token holds"
        raise ClusterError(
            f"the kubeconfig's user {user!r} cannot be sent to the API server: {where} a "
            "space, line break or control character, which no HTTP header can carry "
            "(kubectl refuses it too)",
            hint=f"write the token on one line with nothing around it (kubectl config "
            f"set-credentials {user} --token=…), or keep it in a file named by tokenFile, "
            "whose surrounding whitespace is trimmed",
        )


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def plugin_failures() -> Iterator[list[str]]:
    """Collect what the client logs while it loads credentials: an exec plugin that fails is
    logged (on the root logger, printed raw by Python's last-resort handler), not raised."""
    collect = _Collect()
    root = logging.getLogger()
    root.addHandler(collect)
    try:
        yield collect.messages
    finally:
        root.removeHandler(collect)


def raise_for(failures: list[str], configuration: Any) -> None:
    """The exec plugin's own failure, when it left the client with no credential (the client
    would go on anonymously and the server would answer 403 to `system:anonymous`)."""
    if not failures:
        return
    keys = getattr(configuration, "api_key", None) or {}
    if keys or getattr(configuration, "cert_file", None):
        return
    said = failures[-1]
    if "NoneType" in said and "strip" in said:  # the client's own slip on a terminal
        said = "it exited with an error (its own message is printed above)"
    raise ClusterError(
        f"the kubeconfig's exec credential plugin failed: {said}",
        hint="run the plugin's command by hand to see why (kubectl config view --minify "
        "shows it); kubectl gpu does not fall back to anonymous requests",
    )
