import ArgumentParser
import Glibc

/// The entry point: parse, check, run. ArgumentParser's own usage errors would
/// exit 64; the contract says 2 with one line naming the problem, so parsing is
/// done here rather than by `ParsableCommand.main()`. `--help` still exits 0.
@main
enum Main {
    static func main() async {
        signal(SIGPIPE, SIG_IGN)   // a closed stdout is a write error to report, not a silent death
        let arguments = CommandLine.arguments.dropFirst()
        if arguments.first == "doctor" {
            exit(DoctorRun.main(Array(arguments.dropFirst())))
        }
        let options: Options
        do {
            options = try Options.parse()
        } catch {
            if Options.exitCode(for: error) == .success {
                print(Options.fullMessage(for: error))
                exit(0)
            }
            Stderr.line(oneLine(Options.message(for: error)))
            exit(2)
        }
        if options.isBroadcast {
            exit(await BroadcastRun.main(options))
        }
        let settings: Settings
        do {
            settings = try Settings(options)
        } catch {
            Stderr.line(error.message)
            exit(2)
        }
        exit(await SendRun(settings: settings).run())
    }

    private static func oneLine(_ text: String) -> String {
        let parts = text.split(whereSeparator: \.isNewline).map { $0.trimmed }.filter { !$0.isEmpty }
        let joined = parts.joined(separator: " ")
        return joined.hasPrefix("Error: ") ? String(joined.dropFirst(7)) : joined
    }
}
