/// A FIFO queue with O(1) push and pop at both ends: the inboxes of `IOThread`, the request
/// queues of the service broker.
public struct RingBuffer<Element> {
    private var storage: [Element?]
    private var head = 0
    public private(set) var count = 0

    public init(capacity: Int = 16) {
        storage = Array(repeating: nil, count: Swift.max(1, capacity))
    }

    public var isEmpty: Bool { count == 0 }

    public mutating func append(_ element: Element) {
        if count == storage.count { grow() }
        storage[(head + count) % storage.count] = element
        count += 1
    }

    public mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = storage[head]
        storage[head] = nil
        head = (head + 1) % storage.count
        count -= 1
        return element
    }

    /// Puts an element at the front (it is the next `popFirst`).
    public mutating func prepend(_ element: Element) {
        if count == storage.count { grow() }
        head = (head + storage.count - 1) % storage.count
        storage[head] = element
        count += 1
    }

    /// The element `popFirst` would return.
    public var first: Element? { count > 0 ? storage[head] : nil }

    /// The elements front to back.
    public var elements: [Element] { (0..<count).map { storage[(head + $0) % storage.count]! } }

    /// Removes the elements that match, keeping the order of the rest.
    public mutating func removeAll(where shouldRemove: (Element) -> Bool) {
        let kept = elements.filter { !shouldRemove($0) }
        self = RingBuffer(capacity: Swift.max(16, kept.count))
        for element in kept { append(element) }
    }

    private mutating func grow() {
        var bigger: [Element?] = Array(repeating: nil, count: storage.count * 2)
        for i in 0..<count { bigger[i] = storage[(head + i) % storage.count] }
        storage = bigger
        head = 0
    }
}
