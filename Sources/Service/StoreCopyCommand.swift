import Foundation
import Store

/// `apns-server store copy --from sqlite:PATH --to postgres://… [--into-non-empty]
/// [--batch N]`: moves a SQLite database to PostgreSQL (`StoreCopy`), for a team
/// that outgrows one instance. Progress and the final counts go to stderr.
///
/// Exit status: 0 when every table's counts match, 1 when one does not (or the copy
/// failed on the way: run it again to resume), 2 for bad input, with nothing written.
public enum StoreCopyCommand {
    static let usage = """
        usage: apns-server store copy --from sqlite:PATH --to postgres://USER[:PASSWORD]@HOST[:PORT]/DB
                                      [--into-non-empty] [--batch ROWS]
        Stop apns-server first. A copy that stopped part-way resumes when run again.
        """

    /// `arguments` as the executable got them: `apns-server store copy …`.
    public static func run(arguments: [String]) async -> Int32 {
        var rest = arguments.dropFirst(2)
        guard rest.popFirst() == "copy" else { return fail("unknown store command (apns-server store copy --help)") }
        var from: String?, to: String?
        var options = StoreCopy.Options()
        while let arg = rest.popFirst() {
            switch arg {
            case "-h", "--help":
                print(usage)
                return 0
            case "--from": from = rest.popFirst()
            case "--to": to = rest.popFirst()
            case "--into-non-empty": options.intoNonEmpty = true
            case "--batch":
                guard let value = rest.popFirst().flatMap(Int.init), value > 0 else {
                    return fail("store copy: --batch needs a positive number of rows")
                }
                options.batchSize = value
            default:
                return fail("store copy: unknown argument '\(ServerConfig.redacted(arg))' (apns-server store copy --help)")
            }
        }
        guard let from, let to else { return fail("store copy: --from sqlite:PATH and --to postgres://… are required") }
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
            FileHandle.standardError.write(Data("apns-server: store copy stopped: \(error) (run it again to resume)\n".utf8))
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
