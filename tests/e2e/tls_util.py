"""Test certificates made with the `cryptography` package: a CA, server and client certificates
signed by it (or expired, or from another CA), written as PEM files the way Kafka's
`ssl.keystore.type=PEM` expects them (private key and chain in one file)."""

import datetime
import ipaddress
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(cn, org="Tern"):
    return x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
        x509.NameAttribute(NameOID.COMMON_NAME, cn),
    ])


def _key_pem(key):
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _cert_pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


class CA:
    """A certificate authority that signs server and client certificates into `directory`."""

    def __init__(self, directory, name="Tern Test CA"):
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        self.path = os.path.join(directory, f"{name.replace(' ', '_')}.pem")
        with open(self.path, "wb") as f:
            f.write(_cert_pem(self.cert))

    def issue(self, file_stem, cn, server=False, expired=False, org="Tern"):
        """Writes <stem>.key, <stem>.crt and <stem>.pem (key + chain); returns their paths."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        if expired:
            start, end = now - datetime.timedelta(days=10), now - datetime.timedelta(days=1)
        else:
            start, end = now - datetime.timedelta(days=1), now + datetime.timedelta(days=30)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, org))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        paths = {
            ext: os.path.join(self.directory, f"{file_stem}.{ext}") for ext in ("key", "crt", "pem")
        }
        with open(paths["key"], "wb") as f:
            f.write(_key_pem(key))
        with open(paths["crt"], "wb") as f:
            f.write(_cert_pem(cert) + _cert_pem(self.cert))
        # Written beside and renamed, so that a reloading reader never sees half a file.
        tmp = paths["pem"] + ".tmp"
        with open(tmp, "wb") as f:
            f.write(_key_pem(key) + _cert_pem(cert) + _cert_pem(self.cert))
        os.replace(tmp, paths["pem"])
        return paths
