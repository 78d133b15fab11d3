/// The lane's state machine's actions, in the order its events decided them: the
/// machine appends, the lane moves each one out in turn (`drain`).
///
/// Not an Array: an array hands its elements out by copy, or keeps something in
/// their place to destroy later, and these are values of a generic enum, each copy,
/// move or destroy of which is a call through its value witnesses. Here each action
/// is written once and moved out once. The room is kept between events.
struct ActionList<Element>: RandomAccessCollection {
    private final class Storage {
        var base: UnsafeMutablePointer<Element>
        var count = 0
        var capacity: Int

        init(capacity: Int) {
            self.capacity = capacity
            base = .allocate(capacity: capacity)
        }

        deinit {
            base.deinitialize(count: count)
            base.deallocate()
        }

        func copy() -> Storage {
            let new = Storage(capacity: capacity)
            new.base.initialize(from: base, count: count)
            new.count = count
            return new
        }

        func grow() {
            let bigger = UnsafeMutablePointer<Element>.allocate(capacity: capacity * 2)
            bigger.moveInitialize(from: base, count: count)
            base.deallocate()
            base = bigger
            capacity *= 2
        }
    }

    /// Nil until the first append: an empty list (the lane's, between events) holds no memory.
    private var storage: Storage?

    init() {}

    var startIndex: Int { 0 }
    var endIndex: Int { storage?.count ?? 0 }

    subscript(position: Int) -> Element {
        precondition(position >= 0 && position < endIndex, "action index out of range")
        return storage!.base[position]
    }

    mutating func append(_ element: consuming Element) {
        let s = unique()
        if s.count == s.capacity { s.grow() }
        (s.base + s.count).initialize(to: element)
        s.count += 1
    }

    mutating func removeAll() {
        guard storage != nil else { return }
        let s = unique()
        s.base.deinitialize(count: s.count)
        s.count = 0
    }

    /// Hands each action to `body`, moved out, first to last, and leaves the list
    /// empty (its room kept).
    mutating func drain(_ body: (consuming Element) -> Void) {
        guard storage != nil else { return }
        let s = unique()
        let n = s.count
        s.count = 0
        for i in 0..<n { body((s.base + i).move()) }
    }

    private mutating func unique() -> Storage {
        // Asked before binding it: a binding would be a second reference.
        if !isKnownUniquelyReferenced(&storage) {
            storage = storage?.copy() ?? Storage(capacity: 16)
        }
        return storage!
    }
}
