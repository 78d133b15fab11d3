import ArgumentParser
import Foundation
import Service
import ServiceCore

/// Thin: the service is the Service library's `buildApplication`; this reads the
/// command line, sets up the process's logging and metrics, and runs it.
@main
struct APNsServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-server",
        abstract: "The delivery service: HTTP API, durable outbox, APNs workers.",
        discussion: APNsServer.environmentHelp,
        version: apnsServerVersionLine,
        subcommands: [StoreCommand.self, UserJWTSubcommand.self])

    @Option(help: ArgumentHelp("The YAML configuration (required).", valueName: "FILE.yaml"))
    var config: String?

    @Flag(help: "Check the configuration, the APNs keys and the database connection, then exit (0: ready to start; 2: one line saying what a start would refuse).")
    var checkConfig = false

    /// A usage error exits 2, as a bad configuration does.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()  // --help
            }
        } catch let status as ExitCode {
            Foundation.exit(status.rawValue)
        } catch {
            if exitCode(for: error) == .validationFailure {
                FileHandle.standardError.write(Data("apns-server: \(message(for: error))\n\(usageString())\n".utf8))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }

    func run() async throws {
        guard let path = config else {
            FileHandle.standardError.write(Data("apns-server: --config FILE.yaml is required\n\(Self.usageString())\n".utf8))
            throw ExitCode(2)
        }
        guard let config = APNsServer.loadConfig(path: path, environment: ProcessInfo.processInfo.environment) else {
            throw ExitCode(2)
        }
        let logger = APNsServer.bootstrapLogging(config)
        if checkConfig {
            let status = await APNsServer.check(config: config, logger: logger)
            if status != 0 { throw ExitCode(status) }
            return
        }
        let registry = APNsServer.bootstrapMetrics()
        let status = await APNsServer.serve(config: config, dependencies: Dependencies(metrics: registry), logger: logger)
        if status != 0 { throw ExitCode(status) }
    }
}
