"""Certificates of a course's own Dask cluster (`course cluster-certs`): TLS with mutual authentication.

One certificate authority, made here and kept by the instructor, signs a certificate for the scheduler, one for
the workers and one for the coordinator (the machine that runs `course grade`). Every connection to the
scheduler is TLS and both ends must show a certificate of this authority: a client or a worker without one
cannot submit work, join, or send a result back. `security()` is what the coordinator connects with.
"""
import os
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from distributed.security import Security

ROLES = ("scheduler", "worker", "client")
DAYS = 400  # a semester and some


def make(folder: Path, hosts: Iterable[str] = ()) -> list[Path]:
    """Write ca.pem/ca.key and <role>.pem/<role>.key for each role into `folder` (keys readable by the owner
    only); `hosts`: names and addresses of the scheduler (localhost is always included). Returns the files."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    names = ["DNS:localhost", "IP:127.0.0.1", *(f"IP:{h}" if h.replace(".", "").isdigit() or ":" in h else f"DNS:{h}"
                                                 for h in hosts)]
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", folder / "ca.key", "-out", folder / "ca.pem",
             "-days", str(DAYS), "-subj", "/CN=attncourse grading CA")
    with tempfile.TemporaryDirectory() as scratch:
        extensions = Path(scratch) / "ext.cnf"
        extensions.write_text(f"subjectAltName={','.join(names)}\nextendedKeyUsage=serverAuth,clientAuth\n")
        for role in ROLES:
            request = Path(scratch) / f"{role}.csr"
            _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", folder / f"{role}.key", "-out", request,
                     "-subj", f"/CN=attncourse {role}")
            _openssl("x509", "-req", "-in", request, "-CA", folder / "ca.pem", "-CAkey", folder / "ca.key",
                     "-CAcreateserial", "-CAserial", Path(scratch) / "ca.srl", "-out", folder / f"{role}.pem",
                     "-days", str(DAYS), "-extfile", extensions)
    files = [folder / "ca.pem", folder / "ca.key", *(folder / f"{r}.{e}" for r in ROLES for e in ("pem", "key"))]
    for path in files:
        os.chmod(path, 0o600 if path.suffix == ".key" else 0o644)
    return files


def _openssl(*args: object) -> None:
    done = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {args[0]}: {done.stderr.strip()[-500:]}")


def security(folder: str | Path, role: str = "client") -> Security:
    """Dask's settings for `role` with the certificates in `folder`: TLS required, both ends authenticated."""
    folder = Path(folder)
    missing = [p.name for p in (folder / "ca.pem", folder / f"{role}.pem", folder / f"{role}.key") if not p.exists()]
    if missing:
        raise FileNotFoundError(f"{folder} 中缺少 {'、'.join(missing)}（用 course cluster-certs 生成）")
    files = {"tls_ca_file": str(folder / "ca.pem"), f"tls_{role}_cert": str(folder / f"{role}.pem"),
             f"tls_{role}_key": str(folder / f"{role}.key")}
    return Security(require_encryption=True, **files)


def command_line(folder: str | Path, role: str) -> list[str]:
    """The `dask scheduler` / `dask worker` options for `role` with the certificates in `folder`."""
    folder = Path(folder)
    return ["--tls-ca-file", str(folder / "ca.pem"), "--tls-cert", str(folder / f"{role}.pem"),
            "--tls-key", str(folder / f"{role}.key")]
