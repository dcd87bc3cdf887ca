public import SwitchboardBus

extension DeliveryReport {
    /// What the person at the kiosk reads after a command sent its outbox: delivered, refused,
    /// still waiting (and whether the broker answered at all), one sentence a line.
    /// - Parameters:
    ///   - endpoint: the broker's ingest endpoint, named when it did not answer.
    ///   - wait: how long the command tried.
    public func summary(endpoint: String, wait: Duration) -> [String] {
        var lines: [String] = []
        let sent = delivered + duplicates
        if sent > 0 {
            var line = "Delivered \(sent) check-in\(sent == 1 ? "" : "s")"
            if let lastBusSeq { line += " (broker sequence up to #\(lastBusSeq))" }
            lines.append(line + ".")
        }
        if rejected > 0 {
            lines.append(
                "Refused by the broker: \(rejected) (kept on this kiosk; see 'switchboard-kiosk status'). Last reason: \(lastProblem ?? "unknown")."
            )
        }
        if pending > 0 {
            let waiting = "\(pending) check-in\(pending == 1 ? " is" : "s are")"
            if !brokerAnswered {
                lines.append(
                    "The broker at \(endpoint) did not answer within \(wait). \(waiting) saved on this kiosk and will be sent by the next run."
                )
            } else if let retryReason {
                let them = pending == 1 ? "it" : "them"
                lines.append("\(waiting) still waiting: the broker could not take \(them) (\(retryReason)); the next run sends \(them).")
            } else {
                lines.append("\(waiting) still waiting and will be sent by the next run.")
            }
        } else if rejected == 0 {
            lines.append("Nothing waiting.")
        }
        return lines
    }
}
