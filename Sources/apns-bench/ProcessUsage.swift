#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// CPU time and memory of this whole process (every thread: the sender's, the
/// pool's, and the in-process mock's when there is one).
struct ProcessUsage: Sendable {
    let userSeconds: Double
    let systemSeconds: Double
    /// Peak resident set size (ru_maxrss), in bytes.
    let peakRSS: Int

    static func now() -> ProcessUsage {
        var u = rusage()
        getrusage(RUSAGE_SELF_WHO, &u)
        #if os(Linux)
        let rssUnit = 1024  // kilobytes on Linux
        #else
        let rssUnit = 1  // bytes on Darwin
        #endif
        return ProcessUsage(userSeconds: seconds(u.ru_utime), systemSeconds: seconds(u.ru_stime),
                            peakRSS: Int(u.ru_maxrss) * rssUnit)
    }

    #if os(Linux)
    private static let RUSAGE_SELF_WHO = __rusage_who_t(RUSAGE_SELF.rawValue)
    #else
    private static let RUSAGE_SELF_WHO = RUSAGE_SELF
    #endif

    private static func seconds(_ t: timeval) -> Double {
        Double(t.tv_sec) + Double(t.tv_usec) / 1e6
    }
}
