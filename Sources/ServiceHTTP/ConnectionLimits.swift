import NIOCore
import Synchronization

/// The server's open connections, counted per client address: one address may hold
/// at most `perAddress` of them, so that a single client cannot take every slot of
/// the server's total. Also how a shutdown that ran out of time closes whatever is
/// still open.
package final class ConnectionLimits: Sendable {
    let perAddress: Int
    private struct State {
        var byAddress: [String: Int] = [:]
        var open: [ObjectIdentifier: any Channel] = [:]
    }
    private let state = Mutex(State())

    package init(perAddress: Int) {
        self.perAddress = perAddress
    }

    /// Counts `channel` against its address; false (nothing counted) when that
    /// address already holds its share. The count drops when the channel closes.
    func admit(_ channel: any Channel) -> Bool {
        // A Unix socket or an unknown peer has no address: one shared bucket.
        let address = channel.remoteAddress?.ipAddress ?? "local"
        let id = ObjectIdentifier(channel)
        let admitted = state.withLock { s -> Bool in
            guard s.byAddress[address, default: 0] < perAddress else { return false }
            s.byAddress[address, default: 0] += 1
            s.open[id] = channel
            return true
        }
        guard admitted else { return false }
        channel.closeFuture.whenComplete { _ in
            self.state.withLock { s in
                s.open[id] = nil
                s.byAddress[address, default: 1] -= 1
                if s.byAddress[address] == 0 { s.byAddress[address] = nil }
            }
        }
        return true
    }

    /// Open connections from `address` (for the log and tests of the cap).
    func count(_ address: String) -> Int { state.withLock { $0.byAddress[address] ?? 0 } }

    /// Closes every connection still open (the shutdown's grace has run out).
    package func closeAll() {
        for channel in state.withLock({ Array($0.open.values) }) { channel.close(promise: nil) }
    }
}
