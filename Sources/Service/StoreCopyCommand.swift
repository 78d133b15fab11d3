import Foundation
import ServiceCore
import Store

#if canImport(Glibc)
import Glibc
#endif

/// `apns-server store copy --from sqlite:PATH --to postgres://… [--password-file FILE]
/// [--into-non-empty] [--batch N]` (the executable parses the line): moves a SQLite
/// database to PostgreSQL (`StoreCopy`), for a team that outgrows one instance.
/// Progress and the final counts go to stderr.
///
/// The password, where the URL has none: the first line of `--password-file`, else
/// `PGPASSWORD` (as libpq's tools), so that it need not be in the command line,
/// which `ps` shows to every user.
///
/// Exit status: 0 when every table's counts match, 1 when one does not (or the copy
/// failed on the way: the message says whether to run it again to resume, or what
/// to do instead), 2 for bad input, with nothing written.
public enum StoreCopyCommand {
    /// Copies `from` (`sqlite:PATH`) into `to` (a `postgres://` URL), as the command
    /// line gave them; progress and the counts go to stderr. `environment` is the
    /// process's (`PGPASSWORD`).
    public static func copy(from: String, to: String, passwordFile: String? = nil, intoNonEmpty: Bool, batchSize: Int,
                            environment: [String: String] = ProcessInfo.processInfo.environment) async -> Int32 {
        guard batchSize > 0 else { return fail("store copy: --batch needs a positive number of rows") }
        var options = StoreCopy.Options()
        options.intoNonEmpty = intoNonEmpty
        options.batchSize = batchSize
        let base = URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)
        let source: String
        var target: StoreLocation.PostgresConfiguration
        do {
            guard case .sqlite(let path, _) = try ServerConfig.parseDatabase(from, base: base) else {
                return fail("store copy: --from must be sqlite:PATH")
            }
            guard case .postgres(let configuration) = try ServerConfig.parseDatabase(to, base: base) else {
                return fail("store copy: --to must be postgres://USER@HOST:PORT/DB")
            }
            (source, target) = (path, configuration)
        } catch {
            return fail("store copy: \(error.description)")
        }
        if let passwordFile {
            guard target.password == nil else {
                return fail("store copy: the password is in the --to URL and in --password-file: give it once, in the file")
            }
            switch firstLine(of: passwordFile) {
            case .success(let password) where !password.isEmpty: target.password = password
            case .success: return fail("store copy: --password-file \(passwordFile) is empty")
            case .failure(let reason): return fail("store copy: cannot read --password-file \(passwordFile): \(reason)")
            }
        } else if target.password == nil, let password = environment["PGPASSWORD"], !password.isEmpty {
            target.password = password
        }

        let counts: [StoreCopy.Count]
        do {
            counts = try await StoreCopy(from: source, to: target, options: options).run { line in
                FileHandle.standardError.write(Data("\(line)\n".utf8))
            }
        } catch let refusal as StoreCopy.Refusal {
            return fail("store copy: \(refusal.description)")
        } catch {
            // `StoreCopy.Stopped` says what to do next: a re-run only where it can get further.
            FileHandle.standardError.write(Data("apns-server: store copy stopped: \(error)\n".utf8))
            return 1
        }
        let width = counts.map(\.table.count).max() ?? 0
        var report = "copy: table\(String(repeating: " ", count: max(0, width - 5))) sqlite postgresql\n"
        for count in counts {
            let pad = String(repeating: " ", count: width - count.table.count)
            report += "copy: \(count.table)\(pad) \(count.source) \(count.target)\(count.matches ? "" : "  MISMATCH")\n"
        }
        let matched = counts.allSatisfy(\.matches)
        report += matched ? "copy: check: every table's counts match (\(counts.count) tables)\n"
            : "copy: check: FAILED, counts differ in \(counts.filter { !$0.matches }.map(\.table).joined(separator: ", "))\n"
        FileHandle.standardError.write(Data(report.utf8))
        return matched ? 0 : 1
    }

    /// The file's first line (without its CR LF), or why it cannot be read.
    private static func firstLine(of path: String) -> Result<String, PasswordFileError> {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(PasswordFileError(errno)) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count <= 64 * 1024 {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return .failure(PasswordFileError(errno)) }
            if n == 0 { break }
            bytes.append(contentsOf: chunk[..<n])
        }
        var line = bytes[...]
        if let newline = line.firstIndex(of: 0x0A) { line = line[..<newline] }
        if line.last == 0x0D { line = line.dropLast() }
        return .success(String(decoding: line, as: UTF8.self))
    }

    private struct PasswordFileError: Error, CustomStringConvertible {
        let description: String
        init(_ code: Int32) {
            let text = code == EISDIR ? "is a directory" : String(cString: strerror(code))
            description = text.prefix(1).lowercased() + text.dropFirst()
        }
    }

    private static func fail(_ message: String) -> Int32 {
        FileHandle.standardError.write(Data("apns-server: \(message)\n".utf8))
        return 2
    }
}
