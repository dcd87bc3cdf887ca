public import SwitchboardBus
public import SwitchboardProtocol

extension Outbox.NewEvent {
    /// A check-in as the event a kiosk records: `checkin.recorded` with the person's ordering key
    /// (`CheckInForm.orderingKey`), so every way a kiosk records one (a flag, a CSV row, the demo,
    /// the load generator) keys it the same and the broker keeps each person's check-ins in order.
    public static func checkIn(_ checkIn: CheckIn) throws -> Outbox.NewEvent {
        Outbox.NewEvent(
            type: CheckIn.type, schema: CheckIn.schema, content: try WireJSON.encode(checkIn), key: CheckInForm.orderingKey(checkIn))
    }
}
