import HeapModule
import SwitchboardTesting
import Testing

@testable import SwitchboardBroker

@Suite("Deadline queue")
struct DeadlineQueueTests {
    @Test("deadlines that come in order leave earliest first; one that comes early is still taken at its turn")
    func order() {
        var queue = DeadlineQueue<Int>()
        #expect(queue.min == nil)
        #expect(queue.removeMin() == nil)
        for deadline in [10, 20, 20, 30] { queue.insert(deadline) }
        queue.insert(15)  // before the back: kept beside the others
        queue.insert(5)
        #expect(queue.count == 6)
        #expect(queue.min == 5)
        var taken: [Int] = []
        while let deadline = queue.removeMin() { taken.append(deadline) }
        #expect(taken == [5, 10, 15, 20, 20, 30])
        #expect(queue.isEmpty)
    }

    @Test("20,000 seeded inserts and removals, mostly in order, give what a heap gives")
    func againstAHeap() {
        var random = SeededGenerator(seed: 30)
        var queue = DeadlineQueue<Int>()
        var heap = Heap<Int>()
        var clock = 0
        var differences = 0
        for _ in 0..<20_000 {
            if Int.random(in: 0..<3, using: &random) == 0 {
                if queue.removeMin() != heap.popMin() { differences += 1 }
            } else {
                // A clock that moves forward, read late by one caller in ten.
                clock += Int.random(in: 0..<3, using: &random)
                let deadline = Int.random(in: 0..<10, using: &random) == 0 ? clock - Int.random(in: 1..<50, using: &random) : clock
                queue.insert(deadline)
                heap.insert(deadline)
            }
            if queue.min != heap.min || queue.count != heap.count { differences += 1 }
        }
        while let deadline = heap.popMin() {
            if queue.removeMin() != deadline { differences += 1 }
        }
        #expect(differences == 0)
        #expect(queue.isEmpty)
    }
}
