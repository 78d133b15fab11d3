import Foundation
import Service

// Thin: everything is in the Service library (tested through this binary).
exit(await APNsServer.main(arguments: CommandLine.arguments, environment: ProcessInfo.processInfo.environment))
