"""The control plane's key material: one CA, the API server's and KWOK's serving certificates, the
service-account signing key, and a static admin token.

Made with the `openssl` command (test set-up only; nothing here ships), in a directory that
lives as long as the control plane. The serving certificate names 127.0.0.1 and localhost, so
kubectl and the Python client verify TLS against the CA as they do on a real cluster.
"""

from __future__ import annotations

import dataclasses
import secrets
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Credentials:
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    kubelet_cert: Path  # served by KWOK where the API server expects each node's kubelet
    kubelet_key: Path
    service_account_key: Path  # private: signs tokens (apiserver, controller-manager)
    service_account_pub: Path  # public: verifies them
    token_file: Path  # --token-auth-file: the admin's static token
    admin_token: str


def _openssl(*args: str | Path) -> None:
    binary = shutil.which("openssl")
    if binary is None:
        raise RuntimeError("the control plane's certificates need the openssl command")
    subprocess.run([binary, *map(str, args)], check=True, capture_output=True)


def _serving(d: Path, name: str, names: str) -> None:
    """`name`.crt/.key: a serving certificate for `names` (subjectAltName), signed by the CA."""
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", d / f"{name}.key")
    _openssl(
        "req", "-new", "-key", d / f"{name}.key", "-subj", f"/CN={name}", "-out", d / f"{name}.csr",
    )  # fmt: skip
    (d / f"{name}.ext").write_text(f"subjectAltName={names}\nextendedKeyUsage=serverAuth\n")
    _openssl(
        "x509", "-req", "-in", d / f"{name}.csr", "-CA", d / "ca.crt", "-CAkey", d / "ca.key",
        "-CAcreateserial", "-days", "30", "-extfile", d / f"{name}.ext", "-out", d / f"{name}.crt",
    )  # fmt: skip


def make(directory: Path, kubelet_addresses: Sequence[str] = ()) -> Credentials:
    """A CA and what is signed with it; KWOK's kubelet certificate also names
    `kubelet_addresses` (node InternalIPs a test routes to KWOK's server)."""
    directory.mkdir(parents=True, exist_ok=True)
    d = directory
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", d / "ca.key")
    _openssl(
        "req", "-x509", "-new", "-key", d / "ca.key", "-days", "30", "-subj",
        "/CN=kubectl-gpu-test-ca", "-out", d / "ca.crt",
    )  # fmt: skip
    _serving(
        d, "apiserver", "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,IP:10.0.0.1",
    )  # fmt: skip
    # KWOK's kubelet-like server (container logs): every simulated node's kubelet endpoint
    _serving(d, "kubelet", ",".join(f"IP:{a}" for a in ("127.0.0.1", *kubelet_addresses)))
    _openssl("genrsa", "-out", d / "sa.key", "2048")
    _openssl("rsa", "-in", d / "sa.key", "-pubout", "-out", d / "sa.pub")
    token = secrets.token_hex(16)
    (d / "tokens.csv").write_text(f'{token},kubectl-gpu-admin,admin-uid,"system:masters"\n')
    for private in ("ca.key", "apiserver.key", "kubelet.key", "sa.key", "tokens.csv"):
        (d / private).chmod(0o600)
    return Credentials(
        ca_cert=d / "ca.crt",
        ca_key=d / "ca.key",
        serving_cert=d / "apiserver.crt",
        serving_key=d / "apiserver.key",
        kubelet_cert=d / "kubelet.crt",
        kubelet_key=d / "kubelet.key",
        service_account_key=d / "sa.key",
        service_account_pub=d / "sa.pub",
        token_file=d / "tokens.csv",
        admin_token=token,
    )
