// What metrics cost the broker's ingest: the same load against a broker without metrics
// (`--admin none`) and one with them (`--admin` on a port, scraped every second while the load
// runs, far more often than Prometheus would), alternating, three rounds each.

import Foundation
import SwitchboardTesting

func metricsBench(quick: Bool) async throws {
    let scale = quick ? 10 : 1
    let directory = try TemporaryDirectory("metrics-bench")
    defer { directory.remove() }
    var without: [Measured] = []
    var with: [Measured] = []
    var scrapes = 0
    for round in 0..<3 {
        let plain = try await BrokerProcess.start(directory: directory.path("plain-\(round)"), admin: "none")
        without.append(try await ingest(broker: plain.endpoints, producers: 4, perProducer: 25_000 / scale, window: 1000))
        await plain.stop()
        let port = try freePort()
        let measured = try await BrokerProcess.start(directory: directory.path("metrics-\(round)"), admin: "127.0.0.1:\(port)")
        let scraper = Task {
            var count = 0
            while !Task.isCancelled {
                if (try? await scrapeMetrics(port: port)) != nil { count += 1 }
                try? await Task.sleep(for: .seconds(1))
            }
            return count
        }
        with.append(try await ingest(broker: measured.endpoints, producers: 4, perProducer: 25_000 / scale, window: 1000))
        scraper.cancel()
        scrapes += await scraper.value
        // The figures are the traffic: every acknowledged event is counted once.
        let journaled = try await scrapeMetrics(port: port).value("switchboard_broker_events_journaled_total") ?? 0
        if Int(journaled) != 100_000 / scale {
            print("metrics bench: the broker counted \(Int(journaled)) journaled events, not \(100_000 / scale)")
        }
        await measured.stop()
    }
    func rates(_ runs: [Measured]) -> String { runs.map { String(format: "%.0f", $0.perSecond) }.joined(separator: ", ") }
    let best = (without: without.max { $0.perSecond < $1.perSecond }!, with: with.max { $0.perSecond < $1.perSecond }!)
    print("durable-acked ingest, 4 producers, 100,000 events per run\(quick ? " (/10)" : "")")
    print(String(format: "%-44@ %10.0f/s  runs: %@", "without metrics (--admin none)" as NSString, best.without.perSecond, rates(without)))
    print(String(format: "%-44@ %10.0f/s  runs: %@", "with metrics, scraped every second" as NSString, best.with.perSecond, rates(with)))
    print(
        String(
            format: "best with / best without: %.3f× (cost %.1f %%); %d scrapes during the runs",
            best.with.perSecond / best.without.perSecond,
            (1 - best.with.perSecond / best.without.perSecond) * 100, scrapes))
}
