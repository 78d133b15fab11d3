import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A program the tests start, with the part of Foundation's `Process` they use.
///
/// Foundation's `Process.run()` on Linux (Swift 6.3.1) copies 256 bytes of every
/// `/proc/self/fd` entry that `readdir` returns, reading past short records: with the
/// many descriptors a full test run holds open, it crashed the test process in a
/// `memcpy` (swift-corelibs-foundation#5472; serializing the calls does not help).
/// This starts children with `posix_spawn`: the three standard streams as given,
/// every other descriptor closed (so no child holds another test's pipe open), the
/// signal mask cleared and SIGPIPE, SIGTERM and SIGINT at their defaults.
public final class ChildProcess: @unchecked Sendable {   // configured, then run once; state under a lock
    public var executableURL: URL?
    public var arguments: [String] = []
    /// nil: this process's environment.
    public var environment: [String: String]?
    /// A `Pipe`, a `FileHandle`, or nil for /dev/null.
    public var standardInput: Any?
    public var standardOutput: Any?
    public var standardError: Any?

    public enum TerminationReason: Sendable { case exit, uncaughtSignal }

    private let status = Mutex<(pid: pid_t, wait: Int32?)>((0, nil))

    public init() {}

    public var processIdentifier: Int32 { status.withLock { $0.pid } }

    public func run() throws {
        guard let path = executableURL?.path else { throw POSIXError(.ENOENT) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (target, stream) in [(Int32(0), standardInput), (1, standardOutput), (2, standardError)] {
            if let fd = ChildProcess.descriptor(stream, reading: target == 0) {
                posix_spawn_file_actions_adddup2(&actions, fd, target)
            } else {
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_RDWR, 0)
            }
        }
        guard ChildProcess.closeFrom(&actions, 3) == 0 else { throw POSIXError(.ENOSYS) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), defaults = sigset_t()
        sigemptyset(&none)
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGTERM, SIGINT] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { env in
            env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        }
        defer { envp?.forEach { free($0) } }

        var pid: pid_t = 0
        let rc = envp.map { envp in posix_spawn(&pid, path, &actions, &attributes, argv, envp) }
            ?? posix_spawn(&pid, path, &actions, &attributes, argv, environ)
        guard rc == 0 else { throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .EIO) }
        status.withLock { $0.pid = pid }
        // The child has its copies; the parent's ends of the child's side of each pipe go.
        for (stream, reading) in [(standardInput, true), (standardOutput, false), (standardError, false)] {
            if let pipe = stream as? Pipe { try? (reading ? pipe.fileHandleForReading : pipe.fileHandleForWriting).close() }
        }
    }

    public var isRunning: Bool {
        status.withLock { s in
            guard s.pid > 0, s.wait == nil else { return false }
            var w: Int32 = 0
            if waitpid(s.pid, &w, WNOHANG) == s.pid { s.wait = w }
            return s.wait == nil
        }
    }

    public func waitUntilExit() {
        let pid = status.withLock { $0.wait == nil ? $0.pid : 0 }
        guard pid > 0 else { return }
        var w: Int32 = 0
        while waitpid(pid, &w, 0) < 0 && errno == EINTR {}
        status.withLock { if $0.wait == nil { $0.wait = w } }
    }

    /// The exit code, or the signal that ended it (as Foundation's `Process` reports).
    public var terminationStatus: Int32 {
        let w = status.withLock { $0.wait } ?? 0
        return w & 0x7f == 0 ? (w >> 8) & 0xff : w & 0x7f
    }

    public var terminationReason: TerminationReason {
        let w = status.withLock { $0.wait } ?? 0
        return w & 0x7f == 0 ? .exit : .uncaughtSignal
    }

    public func terminate() { send(SIGTERM) }
    public func interrupt() { send(SIGINT) }

    private func send(_ signal: Int32) {
        let pid = status.withLock { $0.wait == nil ? $0.pid : 0 }
        if pid > 0 { kill(pid, signal) }
    }

    private static func descriptor(_ stream: Any?, reading: Bool) -> Int32? {
        switch stream {
        case let pipe as Pipe: (reading ? pipe.fileHandleForReading : pipe.fileHandleForWriting).fileDescriptor
        case let handle as FileHandle: handle.fileDescriptor >= 0 ? handle.fileDescriptor : nil   // nullDevice: -1
        default: nil
        }
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which Swift's Glibc
    /// module does not declare. (Also for `PostgresCluster`'s own spawns.)
    static let closeFrom: @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32 = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
            fatalError("glibc 2.34 or later is needed (posix_spawn_file_actions_addclosefrom_np)")
        }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()
}
