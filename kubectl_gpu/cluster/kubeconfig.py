"""Connecting as kubectl does: the kubeconfig, its context and namespace, or the pod's account.

Owns loading credentials into the client's configuration, naming what went wrong with a
kubeconfig, and building the `Api` over connections watched for their deadline. Must not send
requests (that is `api.py`).
"""

from __future__ import annotations

from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException

from kubectl_gpu.cluster import credentials
from kubectl_gpu.cluster.api import Api
from kubectl_gpu.cluster.failures import redacted, url_secrets
from kubectl_gpu.cluster.transport import READ_TIMEOUT, watch_pools
from kubectl_gpu.errors import ClusterError

CONNECTIONS = 32  # kept open to the API server, at most (see `connect`)


def connect(
    kubeconfig: str | None = None,
    context: str | None = None,
    timeout: float = READ_TIMEOUT,
    *,
    user_agent: str = "",
) -> Api:
    """Connect as kubectl would: --kubeconfig, else $KUBECONFIG, else ~/.kube/config;
    inside a pod with none of those, the pod's service account. `user_agent` names the caller
    in the server's audit log (5,000 agents share one service account: the node tells them
    apart)."""
    configuration = client.Configuration()
    try:
        loaded = _load(configuration, kubeconfig, context)
    except ConfigException as e:
        raise ClusterError(
            f"cannot load the cluster configuration: {e}",
            hint="pass --kubeconfig and --context, or check `kubectl config current-context`",
        ) from e
    except (yaml.YAMLError, OSError, ValueError, LookupError, TypeError, AttributeError) as e:
        # the client's loader reads whatever the file holds: broken YAML, a list where a
        # mapping belongs, bytes that are not UTF-8 all reach here as Python errors
        raise ClusterError(
            f"cannot read the kubeconfig {_kubeconfig_name(kubeconfig)}: {_config_problem(e)}",
            hint="check it with `kubectl config view`; pass another with --kubeconfig",
        ) from None
    configuration.retries = 0  # urllib3 retries nothing: `Api._send` holds the one policy
    # Keep a connection for each request a command sends at once (share's deletes and top's
    # agents, 16 each, beside a watch). The client keeps 5 per CPU: 10 on two CPUs, where
    # each connection beyond them was closed after one request and the next one opened anew,
    # a TLS handshake on both sides, the API server's included, for every request.
    configuration.connection_pool_maxsize = CONNECTIONS
    api_client = client.ApiClient(configuration)
    watch_pools(api_client.rest_client.pool_manager)
    if user_agent:
        api_client.user_agent = user_agent
    name, namespace = loaded
    host = str(configuration.host)
    return Api(api_client, name, redacted(host), timeout, namespace, secrets=url_secrets(host))


_SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def _load(configuration: Any, kubeconfig: str | None, context: str | None) -> tuple[str, str]:
    """Load the credentials; return the context's name and its namespace ("default" unset)."""
    import os

    # The client reads $KUBECONFIG once, at import; read it now, as kubectl does.
    kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or None
    try:
        with credentials.plugin_failures() as failures:
            config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
        credentials.raise_for(failures, configuration)
    except ConfigException:
        if kubeconfig or context or not _in_cluster():
            raise
        config.load_incluster_config(client_configuration=configuration)
        return "in-cluster", _pod_namespace()
    contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    chosen = next((c for c in contexts if c.get("name") == context), active) if context else active
    user = str((chosen.get("context") or {}).get("user") or "")
    credentials.settle(configuration, user, token_file=_token_from_file(kubeconfig, user))
    namespace = str((chosen.get("context") or {}).get("namespace") or "default")
    return str(chosen.get("name", "")), namespace


def _token_from_file(kubeconfig: str | None, user: str) -> bool:
    """Whether `user`'s token comes from its `tokenFile` (no inline `token`, which wins when
    both are given, in client-go as in the Python client). The first file of a
    $KUBECONFIG list that names the user defines it, as kubectl merges them."""
    import os

    files = (kubeconfig or os.path.expanduser("~/.kube/config")).split(os.pathsep)
    for name in files:
        try:
            with open(name, encoding="utf-8") as handle:
                document = yaml.safe_load(handle.read(_KUBECONFIG_LIMIT))
        except (OSError, ValueError, yaml.YAMLError):
            continue
        users = document.get("users") if isinstance(document, dict) else None
        for entry in users if isinstance(users, list) else []:
            if isinstance(entry, dict) and entry.get("name") == user:
                fields = entry.get("user")
                fields = fields if isinstance(fields, dict) else {}
                return bool(fields.get("tokenFile")) and not fields.get("token")
    return False


_KUBECONFIG_LIMIT = 16 * 1024 * 1024


def _kubeconfig_name(kubeconfig: str | None) -> str:
    """The file(s) the client read, as kubectl would: --kubeconfig, $KUBECONFIG, the default."""
    import os

    return kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")


def _config_problem(e: Exception) -> str:
    if isinstance(e, yaml.MarkedYAMLError) and e.problem_mark is not None:
        return f"line {e.problem_mark.line + 1}: not valid YAML ({e.problem})"
    if isinstance(e, yaml.YAMLError):
        return "not valid YAML"
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 text (byte {e.start})"
    if isinstance(e, OSError):
        return e.strerror or str(e)
    return f"not a kubeconfig (apiVersion: v1, kind: Config, clusters, contexts, users): {e}"


def _pod_namespace() -> str:
    try:
        with open(_SERVICE_ACCOUNT_NAMESPACE) as handle:
            return handle.read(256).strip() or "default"
    except OSError:
        return "default"


def _in_cluster() -> bool:
    import os

    return "KUBERNETES_SERVICE_HOST" in os.environ
