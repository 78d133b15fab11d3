import Foundation

public struct ProcessResult: Sendable {
    public let status: Int32
    public let stdout: String
    public let stderr: String
}

/// Runs a program to completion, collecting its output; standard input from `stdin`
/// when given, else /dev/null. Safe for large outputs (both pipes drained concurrently).
public func runSync(_ path: String, _ arguments: [String], environment: [String: String]? = nil,
                    stdin: Data? = nil, timeout: TimeInterval = 120) -> ProcessResult {
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    let input = Pipe()
    process.standardInput = stdin == nil ? FileHandle.nullDevice : input
    do { try process.run() } catch {
        return ProcessResult(status: -1, stdout: "", stderr: "cannot run \(path): \(error)")
    }
    // The pipes are fed and drained on threads of their own, not Dispatch's global
    // queues: on Linux those share the cooperative pool's threads, which a caller
    // blocked here may be holding.
    if let stdin {
        onThread {
            input.fileHandleForWriting.write(stdin)
            try? input.fileHandleForWriting.close()
        }
    }
    let group = DispatchGroup()
    nonisolated(unsafe) var outData = Data(), errData = Data()
    group.enter()
    onThread { outData = out.fileHandleForReading.readDataToEndOfFile(); group.leave() }
    group.enter()
    onThread { errData = err.fileHandleForReading.readDataToEndOfFile(); group.leave() }
    let killer = DispatchWorkItem { if process.isRunning { process.terminate() } }
    DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: killer)
    group.wait()
    process.waitUntilExit()
    killer.cancel()
    return ProcessResult(status: process.terminationStatus,
                         stdout: String(decoding: outData, as: UTF8.self),
                         stderr: String(decoding: errData, as: UTF8.self))
}

private func onThread(_ work: @escaping @Sendable () -> Void) {
    let thread = Thread(block: work)
    thread.stackSize = 1 << 20
    thread.start()
}

/// The async face of `runSync`, off the cooperative pool.
public func run(_ path: String, _ arguments: [String], environment: [String: String]? = nil,
                stdin: Data? = nil, timeout: TimeInterval = 120) async -> ProcessResult {
    await offPool { runSync(path, arguments, environment: environment, stdin: stdin, timeout: timeout) }
}
