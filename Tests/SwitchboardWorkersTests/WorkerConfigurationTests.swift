import Foundation
import SwitchboardRuntime
import SwitchboardTesting
import SwitchboardWorkers
import Testing

@Suite("Worker configurations: FileMaker, ETO and Directory, each over every worker's settings")
struct WorkerConfigurationTests {
    static func fileMaker(_ sources: ConfigurationSources) throws -> (FileMakerConfiguration, ProgramConfiguration) {
        try sources.read(program: "filemaker", FileMakerConfiguration.programConfiguration) { configuration in
            (try configuration.read { try FileMakerConfiguration(reader: $0) }, configuration)
        }
    }

    static func eto(_ sources: ConfigurationSources) throws -> (ETOConfiguration, ProgramConfiguration) {
        try sources.read(program: "eto", ETOConfiguration.programConfiguration) { configuration in
            (try configuration.read { try ETOConfiguration(reader: $0) }, configuration)
        }
    }

    static func directory(_ sources: ConfigurationSources) throws -> (DirectoryConfiguration, ProgramConfiguration) {
        try sources.read(program: "directory", DirectoryConfiguration.programConfiguration) { configuration in
            (try configuration.read { try DirectoryConfiguration(reader: $0) }, configuration)
        }
    }

    @Test("nothing given: the defaults each --help shows")
    func defaults() throws {
        let (fileMaker, _) = try Self.fileMaker(ConfigurationSources())
        #expect(fileMaker.url == "https://127.0.0.1:8480")
        #expect(fileMaker.database == "Shelter")
        #expect(fileMaker.account == "switchboard")
        #expect(fileMaker.mappingPath == nil && fileMaker.participantsLayout == nil)
        #expect(fileMaker.startTimeout == .seconds(60))
        #expect(fileMaker.worker.credit == WorkerSettings.defaultCredit)
        let (eto, _) = try Self.eto(ConfigurationSources())
        #expect(eto.url == "https://127.0.0.1:8480/API")
        #expect(eto.account == "intake@riverside.example")
        #expect(eto.touchpointPath == nil)
        #expect(eto.concurrency == 4)
        #expect(!eto.noService && !eto.noGroup)
        let (directory, _) = try Self.directory(ConfigurationSources())
        #expect(directory.url == "https://127.0.0.1:8480/directory")
        #expect(directory.account == "outreach-team")
        #expect(directory.interval == .seconds(30))
        #expect(directory.maxMissing == 0.5)
        #expect(directory.startTimeout == .seconds(60))
    }

    @Test("the file, then the environment, then a flag; each is named")
    func precedence() throws {
        var sources = ConfigurationSources(
            file: #"{"eto": {"concurrency": 8, "url": "https://eto.example/API"}, "filemaker": {"database": "Other"}}"#)
        var (eto, configuration) = try Self.eto(sources)
        #expect(eto.concurrency == 8)
        #expect(eto.url == "https://eto.example/API")
        #expect(configuration.source(of: "concurrency")?.hasSuffix("(eto.concurrency)") == true)
        #expect(try Self.fileMaker(sources).0.database == "Other")
        sources.environment = ["SWITCHBOARD_ETO_CONCURRENCY": "16", "SWITCHBOARD_ETO_NO_GROUP": "true"]
        (eto, configuration) = try Self.eto(sources)
        #expect(eto.concurrency == 16)
        #expect(eto.noGroup)
        #expect(configuration.source(of: "concurrency") == "environment SWITCHBOARD_ETO_CONCURRENCY")
        sources.flags = ["--concurrency", "2", "--credit", "4"]
        (eto, configuration) = try Self.eto(sources)
        #expect(eto.concurrency == 2)
        #expect(eto.worker.credit == 4)
        #expect(configuration.source(of: "concurrency") == "flag --concurrency")
        let (directory, named) = try Self.directory(
            ConfigurationSources(environment: ["SWITCHBOARD_DIRECTORY_INTERVAL": "5m"], flags: ["--max-missing", "0.25"]))
        #expect(directory.interval == .seconds(300))
        #expect(directory.maxMissing == 0.25)
        #expect(named.source(of: "max_missing") == "flag --max-missing")
    }

    @Test(
        "a bad value is refused naming the key and where it came from",
        arguments: [
            ("eto", ConfigurationSources(flags: ["--concurrency", "0"]), "concurrency from flag --concurrency: must be 1–64, got 0"),
            ("eto", ConfigurationSources(flags: ["--no-service", "--no-group"]), "together leave nothing to do"),
            ("eto", ConfigurationSources(environment: ["SWITCHBOARD_ETO_URL": "eto.example"]), "url from environment SWITCHBOARD_ETO_URL"),
            (
                "filemaker", ConfigurationSources(file: #"{"filemaker": {"start_timeout": "2h"}}"#),
                "must be from 1s to 1h, got 2h"
            ),
            ("filemaker", ConfigurationSources(file: #"{"filemaker": {"touchpoint": "x"}}"#), "unknown key 'filemaker.touchpoint'"),
            (
                "directory", ConfigurationSources(flags: ["--max-missing", "1.5"]),
                "max_missing from flag --max-missing: must be above 0 and at most 1, got 1.5"
            ),
            ("directory", ConfigurationSources(environment: ["SWITCHBOARD_DIRECTORY_INTERVAL": "50ms"]), "interval from environment"),
        ])
    func refusals(program: String, sources: ConfigurationSources, mentions: String) {
        do {
            switch program {
            case "eto": _ = try Self.eto(sources)
            case "filemaker": _ = try Self.fileMaker(sources)
            default: _ = try Self.directory(sources)
            }
            Issue.record("accepted \(sources)")
        } catch {
            #expect("\(error)".contains(mentions), "\(error)")
        }
    }
}
