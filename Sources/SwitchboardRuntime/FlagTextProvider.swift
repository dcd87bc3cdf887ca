// The command-line provider splits every flag's value at its commas (`--ingest tcp://a,tcp://b`
// becomes two values), so asking it for text failed ("the value is not text") for any flag
// whose text holds a comma: a list of brokers, or a note. This wrapper asks for text as text
// first and, when the provider holds several values, gives them back joined with the commas
// they were split at. Lists (`stringArray`) and every other type pass through unchanged.

import Configuration

struct FlagTextProvider<Upstream: ConfigProvider>: ConfigProvider {
    let upstream: Upstream

    var providerName: String { upstream.providerName }

    func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        try Self.text(key, type) { try upstream.value(forKey: $0, type: $1) }
    }

    func fetchValue(forKey key: AbsoluteConfigKey, type: ConfigType) async throws -> LookupResult {
        try value(forKey: key, type: type)
    }

    nonisolated(nonsending) func watchValue<Return: ~Copyable>(
        forKey key: AbsoluteConfigKey, type: ConfigType,
        updatesHandler:
            nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<Result<LookupResult, any Error>, Never>) async throws -> Return
    ) async throws -> Return {
        try await watchValueFromValue(forKey: key, type: type, updatesHandler: updatesHandler)
    }

    func snapshot() -> any ConfigSnapshot { Snapshot(upstream: upstream.snapshot()) }

    nonisolated(nonsending) func watchSnapshot<Return: ~Copyable>(
        updatesHandler: nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<any ConfigSnapshot, Never>) async throws -> Return
    ) async throws -> Return {
        try await upstream.watchSnapshot { sequence in
            try await updatesHandler(ConfigUpdatesAsyncSequence(sequence.map { Snapshot(upstream: $0) as any ConfigSnapshot }))
        }
    }

    struct Snapshot: ConfigSnapshot {
        let upstream: any ConfigSnapshot
        var providerName: String { upstream.providerName }
        func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
            try FlagTextProvider.text(key, type) { try upstream.value(forKey: $0, type: $1) }
        }
    }

    /// A text lookup that the split values can answer, joined again.
    static func text(
        _ key: AbsoluteConfigKey, _ type: ConfigType, _ lookUp: (AbsoluteConfigKey, ConfigType) throws -> LookupResult
    ) throws -> LookupResult {
        guard type == .string else { return try lookUp(key, type) }
        do {
            return try lookUp(key, .string)
        } catch {
            let list = try lookUp(key, .stringArray)
            guard let value = list.value, case .stringArray(let parts) = value.content else { throw error }
            return LookupResult(
                encodedKey: list.encodedKey, value: ConfigValue(.string(parts.joined(separator: ",")), isSecret: value.isSecret))
        }
    }
}
