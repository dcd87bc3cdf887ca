import Foundation
import SwitchboardMonitor
import Testing

@Suite struct RedactionTests {
    private func text(_ value: Any) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]), as: UTF8.self)
    }

    @Test("secret-looking keys are hidden at any depth")
    func secretsAtAnyDepth() throws {
        let data = json(#"{"user":"ana","password":"p","nested":{"securityToken":"t","list":[{"api_key":"k"}]}}"#)
        let redacted = try text(Redaction.redactedJSON(data))
        #expect(!redacted.contains("\"p\""))
        #expect(!redacted.contains("\"t\""))
        #expect(!redacted.contains("\"k\""))
        #expect(redacted.contains("ana"))
    }

    @Test("the HTTP redactor's secret words are hidden too, and personal data unless asked")
    func personalAndSharedSecrets() throws {
        let data = json(
            #"{"participant":{"first_name":"Zelda","last_name":"Q","date_of_birth":"1987-06-05","eto_participant_id":1204},"#
                + #""location":{"latitude":37.7,"longitude":-122.4},"notes":"n1","site_id":12,"x_pwd":"s1","access_key":"s2","#
                + #""connectionId":"s3"}"#)
        let hidden = try text(Redaction.redactedJSON(data))
        for value in ["Zelda", "1987-06-05", "37.7", "n1", "s1", "s2", "s3"] { #expect(!hidden.contains(value), "\(value): \(hidden)") }
        #expect(hidden.contains("1204") && hidden.contains("\"site_id\":12"), "\(hidden)")
        let shown = try text(Redaction.redactedJSON(data, showingPersonalData: true))
        for value in ["Zelda", "1987-06-05", "37.7", "n1"] { #expect(shown.contains(value), "\(value): \(shown)") }
        for value in ["s1", "s2", "s3"] { #expect(!shown.contains(value), "\(value): \(shown)") }
    }

    @Test("what is not JSON becomes a placeholder, never the raw bytes")
    func notJSON() {
        #expect(Redaction.redactedJSON(json("password=hunter2")) as? String == "[not JSON]")
    }
}
