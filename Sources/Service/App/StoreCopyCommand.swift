import Foundation
import Store

/// `apns-server store copy --from sqlite:PATH --to postgres://… [--into-non-empty]
/// [--batch N]` (the executable parses the line): moves a SQLite database to PostgreSQL (`StoreCopy`), for a team
/// that outgrows one instance. Progress and the final counts go to stderr.
///
/// Exit status: 0 when every table's counts match, 1 when one does not (or the copy
/// failed on the way: the message says whether to run it again to resume, or what
/// to do instead), 2 for bad input, with nothing written.
public enum StoreCopyCommand {
    /// Copies `from` (`sqlite:PATH`) into `to` (a `postgres://` URL), as the command
    /// line gave them; progress and the counts go to stderr.
    public static func copy(from: String, to: String, intoNonEmpty: Bool, batchSize: Int) async -> Int32 {
        guard batchSize > 0 else { return fail("store copy: --batch needs a positive number of rows") }
        var options = StoreCopy.Options()
        options.intoNonEmpty = intoNonEmpty
        options.batchSize = batchSize
        let base = URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)
        let source: String, target: StoreLocation.PostgresConfiguration
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

    private static func fail(_ message: String) -> Int32 {
        FileHandle.standardError.write(Data("apns-server: \(message)\n".utf8))
        return 2
    }
}
