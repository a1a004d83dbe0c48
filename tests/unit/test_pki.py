from __future__ import annotations

from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtensionOID, NameOID

from yuniplace.localcluster.pki import CertificateAuthority, write_service_account_keys


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_issued_certificates_chain_to_the_ca_and_carry_identity(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path, "test-ca")
    pair = ca.issue("admin", "kubernetes-admin", organization="system:masters", ip_addresses=("127.0.0.1",))
    ca_cert, cert = load(ca.pair.cert), load(pair.cert)
    cert.verify_directly_issued_by(ca_cert)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kubernetes-admin"
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    names = cert.extensions.get_extension_for_oid(ExtensionOID.SUBJECT_ALTERNATIVE_NAME).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert pair.key.stat().st_mode & 0o077 == 0


def test_service_account_keys_are_a_matching_pair(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    pair = write_service_account_keys(tmp_path)
    private = serialization.load_pem_private_key(pair.key.read_bytes(), password=None)
    public = serialization.load_pem_public_key(pair.cert.read_bytes())
    assert isinstance(private, ec.EllipticCurvePrivateKey)
    assert private.public_key().public_numbers() == public.public_numbers()  # type: ignore[union-attr]


def test_private_keys_are_sec1_pem_which_java_clients_read(tmp_path: Path) -> None:
    """fabric8 (spark-submit's Kubernetes client) picks the key type from the PEM header: a PKCS #8
    EC key is read as RSA and refused."""
    ca = CertificateAuthority(tmp_path, "test-ca")
    for path in (ca.pair.key, ca.issue("admin", "kubernetes-admin").key, write_service_account_keys(tmp_path).key):
        assert path.read_text().startswith("-----BEGIN EC PRIVATE KEY-----\n"), path
