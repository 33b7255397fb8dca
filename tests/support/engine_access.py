"""How clients reach the tests' second Docker engine, made by the tests themselves: TLS
certificates (`make_certs`, openssl CLI), a Docker context in a DOCKER_CONFIG of their own
(`make_context`), and an sshd of their own on loopback whose only command is
`docker system dial-stdio` (`Sshd`).

OpenSSH reads ~/.ssh/config from the passwd entry's home, not from $HOME, so `HOME=dir ssh ...`
alone would not see dir/.ssh/config: the ssh home also holds `bin/ssh`, a wrapper that runs
/usr/bin/ssh with `-F dir/.ssh/config`; put dir/bin first on PATH (Sshd.env()) and both the
docker CLI and docker-py (`use_ssh_client=True`, which runs `ssh` from PATH) go through it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.dockerd import ServerTls, end_process
from tests.support.host_state import docker

TOOLS = ("openssl", "sshd", "ssh", "ssh-keygen")

_OPENSSL_CNF = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = agentbench test
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""
_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, timeout=60)


def make_certs(directory: Path) -> tuple[ServerTls, Path]:
    """A CA, a server certificate (SAN IP:127.0.0.1, DNS:localhost) and a client certificate
    (clientAuth) under `directory`; the daemon's files, and the client directory holding the
    docker-conventional ca.pem, cert.pem, key.pem."""
    server, client = directory / "server", directory / "client"
    for path in (directory, server, client):
        path.mkdir(mode=0o700, exist_ok=True)
    cnf = directory / "openssl.cnf"
    cnf.write_text(_OPENSSL_CNF)
    ca, ca_key = directory / "ca.pem", directory / "ca-key.pem"
    _openssl("req", "-x509", "-config", cnf, "-extensions", "ca", *_EC, "-keyout", ca_key,
             "-out", ca, "-days", "7", "-subj", "/CN=agentbench test CA")
    for serial, (where, kind, name) in enumerate(
            [(server, "server", "localhost"), (client, "client", "agentbench test client")], 2):
        csr = where / "req.csr"
        _openssl("req", "-new", "-config", cnf, *_EC, "-keyout", where / "key.pem", "-out", csr,
                 "-subj", f"/CN={name}")
        _openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-set_serial",
                 str(serial), "-days", "7", "-extfile", cnf, "-extensions", kind,
                 "-out", where / "cert.pem")
        csr.unlink()
        (where / "ca.pem").write_bytes(ca.read_bytes())
        (where / "key.pem").chmod(0o600)
    ca_key.unlink()  # nothing more to sign
    return ServerTls(server / "ca.pem", server / "cert.pem", server / "key.pem"), client


def make_context(docker_config: Path, name: str, tls_url: str, client: Path) -> None:
    """Docker context `name` for `tls_url` with the client certificates, in `docker_config`
    (never the real ~/.docker), made its current context: DOCKER_CONFIG alone selects it, for
    the CLI and for docker-py's ContextAPI (which ignores DOCKER_CONTEXT)."""
    docker_config.mkdir(mode=0o700, exist_ok=True)
    env = {"DOCKER_CONFIG": str(docker_config)}
    endpoint = (f"host={tls_url},ca={client / 'ca.pem'},cert={client / 'cert.pem'},"
                f"key={client / 'key.pem'}")
    docker("context", "create", name, "--docker", endpoint, env=env, timeout=30)
    docker("context", "use", name, env=env, timeout=30)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Sshd:
    """An sshd of the tests' own on 127.0.0.1:port: own host key, config and pid file, key-only
    login for root with a key made here, and one command, `docker -H <unix_host> system
    dial-stdio` (ForceCommand), whatever the client asks to run. `home` is the client side:
    .ssh/{config,id_ed25519,known_hosts} and bin/ssh (see the module docstring)."""

    directory: Path
    unix_host: str
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def home(self) -> Path:
        return self.directory / "home"

    @property
    def url(self) -> str:
        return f"ssh://root@127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """HOME and PATH for a process that should reach `url` (its `ssh` is the wrapper)."""
        return {"HOME": str(self.home),
                "PATH": f"{self.home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}

    def _keys(self) -> None:
        server, dot_ssh = self.directory / "server", self.home / ".ssh"
        for path in (self.directory, server, self.home, dot_ssh, self.home / "bin"):
            path.mkdir(mode=0o700, exist_ok=True)
        for key in (server / "host_ed25519", dot_ssh / "id_ed25519"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "agentbench test",
                            "-f", str(key)], check=True, capture_output=True, timeout=30)
        (server / "authorized_keys").write_bytes((dot_ssh / "id_ed25519.pub").read_bytes())

    def _configs(self) -> Path:
        server, dot_ssh = self.directory / "server", self.home / ".ssh"
        host_key = (server / "host_ed25519.pub").read_text().split()
        (dot_ssh / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {host_key[0]} "
                                             f"{host_key[1]}\n")
        (dot_ssh / "config").write_text(
            f"Host 127.0.0.1\n  Port {self.port}\n  User root\n"
            f"  IdentityFile {dot_ssh / 'id_ed25519'}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {dot_ssh / 'known_hosts'}\n  StrictHostKeyChecking yes\n"
            "  BatchMode yes\n  LogLevel ERROR\n")
        wrapper = self.home / "bin" / "ssh"
        wrapper.write_text(f'#!/bin/sh\nexec /usr/bin/ssh -F {dot_ssh / "config"} "$@"\n')
        wrapper.chmod(0o755)
        config = server / "sshd_config"
        config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {server / 'host_ed25519'}\n"
            f"PidFile {server / 'sshd.pid'}\nAuthorizedKeysFile {server / 'authorized_keys'}\n"
            "PermitRootLogin prohibit-password\nAllowUsers root\nPubkeyAuthentication yes\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
            "StrictModes no\nX11Forwarding no\nAllowTcpForwarding no\nAllowAgentForwarding no\n"
            "PermitTTY no\nPrintMotd no\nLogLevel VERBOSE\n"
            f"ForceCommand docker -H {self.unix_host} system dial-stdio\n")
        return config

    def start(self) -> None:
        """Keys, configs and sshd on a free port (another try on a new port if it was taken)."""
        self._keys()
        # privilege separation needs it; left in place at close: another session's sshd (tests
        # run side by side on one machine) may need it, and the package would make it anyway
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        for tries_left in (2, 1, 0):
            self.port = free_port()
            config = self._configs()
            with (self.directory / "sshd.log").open("ab") as log:
                self.proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(config)],
                                             stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True)
            deadline = time.monotonic() + 20
            while self.proc.poll() is None and time.monotonic() < deadline:
                with contextlib.suppress(OSError), socket.create_connection(
                        ("127.0.0.1", self.port), timeout=1) as sock:
                    if sock.recv(4).startswith(b"SSH-"):
                        return
                time.sleep(0.1)
            end_process(self.proc, 5)
            if not tries_left:
                raise RuntimeError(f"sshd: {(self.directory / 'sshd.log').read_text()[-2000:]}")

    def close(self) -> None:
        end_process(self.proc, 10)
        self.proc = None
