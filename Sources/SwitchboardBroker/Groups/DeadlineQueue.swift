// The ack deadlines of a group's deliveries, earliest first.
//
// Every deadline is `now + ackWait` with one `ackWait` per group, so they come almost always in
// order: those join the back of a FIFO, and the earliest is its front (no heap work per
// delivery: pushing into and popping from a heap of a thousand deadlines was 6–7 % of the broker
// thread while a group consumed). One that comes before the back (a clock read earlier by its
// caller, or equal times in another order) goes into a heap beside it, and `min` looks at both.

import DequeModule
import HeapModule

struct DeadlineQueue<Element: Comparable> {
    /// Deadlines in the order they came, each at or after the one before.
    private var ordered = Deque<Element>()
    /// Those that came before the back of `ordered`.
    private var others = Heap<Element>()

    var isEmpty: Bool { ordered.isEmpty && others.isEmpty }
    var count: Int { ordered.count + others.count }

    /// The earliest deadline.
    var min: Element? {
        switch (ordered.first, others.min) {
        case (let first?, let other?): Swift.min(first, other)
        case (let first?, nil): first
        case (nil, let other): other
        }
    }

    mutating func insert(_ element: Element) {
        if let last = ordered.last, element < last {
            others.insert(element)
        } else {
            ordered.append(element)
        }
    }

    /// Removes and returns the earliest deadline.
    @discardableResult
    mutating func removeMin() -> Element? {
        switch (ordered.first, others.min) {
        case (let first?, let other?): first <= other ? ordered.removeFirst() : others.removeMin()
        case (_?, nil): ordered.removeFirst()
        case (nil, _?): others.removeMin()
        case (nil, nil): nil
        }
    }
}

extension DeadlineQueue: Sendable where Element: Sendable {}
