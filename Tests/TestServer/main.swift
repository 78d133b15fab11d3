import Foundation
import Logging
import Service

// apns-server for tests that move time: the same service, its clock read from a
// file the test writes (see `FileClock`). Built with the tests, never shipped:
// the release apns-server has no way to read its time from a file.
//
// usage: apns-server-testclock --clock FILE --config FILE.yaml
func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("apns-server-testclock: \(message)\n".utf8))
    exit(2)
}
let arguments = CommandLine.arguments.dropFirst()
guard arguments.count == 4, let clock = arguments.firstIndex(of: "--clock"), let configFlag = arguments.firstIndex(of: "--config"),
      clock + 1 < arguments.endIndex, configFlag + 1 < arguments.endIndex else {
    fail("usage: apns-server-testclock --clock FILE --config FILE.yaml")
}
let clockPath = arguments[clock + 1]
guard FileManager.default.isReadableFile(atPath: clockPath) else { fail("cannot read the clock file \(clockPath)") }
guard let config = APNsServer.loadConfig(path: arguments[configFlag + 1],
                                         environment: ProcessInfo.processInfo.environment) else { exit(2) }
let logger = APNsServer.bootstrapLogging(config)
logger.warning("test clock: the time is read from \(clockPath)")
let registry = APNsServer.bootstrapMetrics()
exit(await APNsServer.serve(config: config, dependencies: Dependencies(clock: FileClock(path: clockPath), metrics: registry),
                            logger: logger))
