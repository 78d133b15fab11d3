import Foundation
import TestSupport

/// Certificates made for one test, beside TestPKI's: one the test CA signed for another
/// name, and a CA that signed nothing the servers present.
enum TestCertificates {
    /// A key and certificate signed by the test CA for `subjectAltName` only.
    static func signed(subjectAltName: String) throws -> (key: String, certificate: String) {
        let pki = TestPKI.shared
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("capns-h2-\(UUID())").path
        let made = runSync("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
            "-subj", "/CN=other", "-addext", "subjectAltName=\(subjectAltName)",
            "-CA", pki.caFile, "-CAkey", pki.directory.appendingPathComponent("ca.key").path,
            "-keyout", base + ".key", "-out", base + ".crt"])
        guard made.status == 0 else { throw HarnessError(message: "openssl req: \(made.stderr)") }
        return (base + ".key", base + ".crt")
    }

    /// A CA certificate that did not sign the server's certificate.
    static func unrelatedCA() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("capns-other-ca-\(UUID()).pem").path
        let made = runSync("/usr/bin/openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                                                "-nodes", "-days", "1", "-subj", "/CN=not the test CA",
                                                "-keyout", "/dev/null", "-out", path])
        guard made.status == 0 else { throw HarnessError(message: "openssl req: \(made.stderr)") }
        return path
    }
}
