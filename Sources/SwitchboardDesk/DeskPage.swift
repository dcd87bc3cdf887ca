// The desk's HTML, CSS and script, all served by the process (no outside resources). The page
// works as plain forms; the script only keeps the journey and the banner live (server-sent
// events) and goes back to sign-in when the session ends. Everything typed or stored is escaped.
//
// Accessibility: one h1, a landmark per part (header, main, sections with headings), a label on
// every input, a polite live region for status changes, focus always visible, controls at
// least 44 px high, one column below 700 px so nothing overflows a phone.

import Foundation

enum DeskPage {
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }

    static let lockedMessage =
        "Too many wrong passwords: signing in with this name or from this device is locked for 15 minutes. Ask another staff member or an administrator."

    static let doneMessages = [
        "checkin": "Checked in. The journey below shows where the check-in is.",
        "walkin": "Walk-in entered and checked in. ETO will enrol the person.",
        "void": "Check-in voided.",
    ]

    /// A fixed sentence per known dead-letter code: never the letter's message (it may quote ETO).
    static let problemSentences = [
        "participant-unmatched": "ETO: participant not matched — ask an administrator",
        "unknown-site": "ETO: this site is not in ETO — ask an administrator",
        "eto-http-400": "ETO refused the check-in — ask an administrator",
        "filemaker-http-400": "FileMaker refused the check-in — ask an administrator",
        "schema-violation": "The check-in could not be read by a worker — ask an administrator",
    ]

    struct State: Sendable, Hashable {
        /// saved, broker, filemaker, eto, done, voiding, voided, problem, refused.
        var kind: String
        var text: String
    }

    static func state(of row: JourneyRow, pending: Set<String>, refused: Set<String>) -> State {
        if let code = row.problem {
            return State(kind: "problem", text: problemSentences[code] ?? "Problem (code \(code)) — ask an administrator")
        }
        if refused.contains(row.eventID) { return State(kind: "problem", text: "Refused by the broker — ask an administrator") }
        if let void = row.voidEventID {
            if row.voidedInFileMaker && row.voidedInETO { return State(kind: "voided", text: "Voided in FileMaker and ETO") }
            var parts: [String] = []
            if pending.contains(void) { parts.append("saved on this desk") } else { parts.append("on the broker") }
            if row.voidedInFileMaker { parts.append("voided in FileMaker") }
            if row.voidedInETO { parts.append("voided in ETO") }
            return State(kind: "voiding", text: "Voided: " + parts.joined(separator: ", "))
        }
        if row.inFileMaker && row.inETO { return State(kind: "done", text: "Done: in FileMaker and ETO") }
        if row.inFileMaker { return State(kind: "filemaker", text: "In FileMaker; waiting for ETO") }
        if row.inETO { return State(kind: "eto", text: "In ETO; waiting for FileMaker") }
        if pending.contains(row.eventID) { return State(kind: "saved", text: "Saved on this desk; waiting to send") }
        return State(kind: "broker", text: "On the broker; waiting for FileMaker and ETO")
    }

    static func document(title: String, body: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(escape(title))</title>
        <link rel="stylesheet" href="/desk.css">
        <script src="/desk.js" defer></script>
        </head>
        <body>
        \(body)
        </body>
        </html>

        """
    }

    static func signIn(message: String?) -> String {
        document(
            title: "Sign in — front desk",
            body: """
                <main id="main" class="narrow">
                <h1>Front desk: sign in</h1>
                <p id="status" role="status" aria-live="polite">\(message.map(escape) ?? "")</p>
                <form method="post" action="/signin">
                <label for="name">Name</label>
                <input id="name" name="name" autocomplete="username" required autofocus>
                <label for="password">Password</label>
                <input id="password" name="password" type="password" autocomplete="current-password" required>
                <button type="submit">Sign in</button>
                </form>
                </main>
                """)
    }

    struct MainModel {
        var kioskID: String
        var siteID: Int64
        var programID: Int64
        var csrf: String
        var staffID: String
        var message: String?
        var problem: DeskProblem?
        var name: String
        var dateOfBirth: String
        var results: [RosterPerson]?
        var searchNote: String?
        var walkIn: [String: String]
        var rows: [(JourneyRow, State)]
        var banner: String?
        var roster: String
    }

    static func field(_ id: String, _ label: String, value: String = "", type: String = "text", extra: String = "") -> String {
        """
        <div class="field"><label for="\(id)">\(label)</label><input id="\(id)" name="\(id.split(separator: "-").last.map(String.init) ?? id)" type="\(type)" value="\(escape(value))" \(extra)></div>
        """
    }

    static func main(_ model: MainModel) -> String {
        let csrf = "<input type=\"hidden\" name=\"csrf\" value=\"\(escape(model.csrf))\">"
        var status = model.message.map(escape) ?? ""
        if let problem = model.problem {
            status =
                "<strong>Not saved.</strong> "
                + escape(problem.field.map { "\($0.prefix(1).uppercased() + $0.dropFirst()) \(problem.message)" } ?? problem.message)
        }
        var results = ""
        if let found = model.results {
            if found.isEmpty {
                results = "<p>No one found. Check the spelling, or enter a walk-in below.</p>"
            } else {
                results = "<ul class=\"results\">"
                for (index, person) in found.enumerated() {
                    let born = person.dateOfBirth.map { "born \(escape($0))" } ?? "no date of birth"
                    results += """
                        <li><form method="post" action="/checkin" class="result">\(csrf)
                        <input type="hidden" name="participant_id" value="\(person.participantID)">
                        <input type="hidden" name="first_name" value="\(escape(person.firstName))">
                        <input type="hidden" name="last_name" value="\(escape(person.lastName))">
                        <input type="hidden" name="date_of_birth" value="\(escape(person.dateOfBirth ?? ""))">
                        <p class="who"><strong>\(escape(person.firstName)) \(escape(person.lastName))</strong> <span>\(born) · ETO #\(person.participantID)</span></p>
                        \(field("r\(index)-bed", "Bed (optional)", extra: "maxlength=\"50\""))
                        \(field("r\(index)-notes", "Notes (optional)", extra: "maxlength=\"2000\""))
                        <button type="submit">Check in \(escape(person.firstName)) \(escape(person.lastName))</button>
                        </form></li>
                        """
                }
                results += "</ul>"
            }
            if let note = model.searchNote { results += "<p class=\"note\">\(escape(note))</p>" }
        }
        var today = ""
        if model.rows.isEmpty {
            today = "<p>No check-ins at this desk today yet.</p>"
        } else {
            today = "<ol class=\"today\" id=\"today\">"
            for (row, state) in model.rows {
                let time = row.recordedAt.count >= 16 ? String(row.recordedAt.dropFirst(11).prefix(5)) : row.recordedAt
                var item = """
                    <li><p class="who"><strong>\(escape(row.who))</strong>\(row.isWalkIn ? " <span class=\"tag\">walk-in</span>" : "") <span>\(escape(time)) UTC\(row.bed.map { " · bed \(escape($0))" } ?? "")</span></p>
                    <p class="state \(state.kind)" data-journey="\(escape(row.eventID))">\(escape(state.text))</p>
                    """
                if row.voidEventID == nil {
                    item += """
                        <details><summary>Void this check-in</summary>
                        <form method="post" action="/void">\(csrf)<input type="hidden" name="event_id" value="\(escape(row.eventID))">
                        <div class="field"><label for="reason-\(escape(row.eventID))">Reason (required)</label><input id="reason-\(escape(row.eventID))" name="reason" required maxlength="500"></div>
                        <button type="submit" class="danger">Void</button></form></details>
                        """
                }
                today += item + "</li>"
            }
            today += "</ol>"
        }
        let gender = model.walkIn["gender"] ?? ""
        func option(_ value: String, _ label: String) -> String {
            "<option value=\"\(value)\"\(gender == value ? " selected" : "")>\(label)</option>"
        }
        return document(
            title: "Front desk — \(model.kioskID)",
            body: """
                <header>
                <h1>Front desk <span>\(escape(model.kioskID)) · site \(model.siteID) · program \(model.programID)</span></h1>
                <form method="post" action="/signout" class="signout">\(csrf)<span>Signed in as \(escape(model.staffID))</span> <button type="submit">Sign out</button></form>
                <p id="banner" class="banner" role="alert"\(model.banner == nil ? " hidden" : "")>\(escape(model.banner ?? ""))</p>
                <p id="roster" class="roster">\(escape(model.roster))</p>
                </header>
                <main id="main">
                <p id="status" role="status" aria-live="polite">\(status)</p>
                <section aria-labelledby="find-heading">
                <h2 id="find-heading">Find a person</h2>
                <form method="get" action="/" class="search" role="search">
                \(field("search-name", "First or last name", value: model.name, extra: "autocomplete=\"off\""))
                \(field("search-dob", "Date of birth (optional)", value: model.dateOfBirth, type: "date"))
                <button type="submit">Search</button>
                </form>
                \(results)
                </section>
                <section aria-labelledby="walkin-heading">
                <h2 id="walkin-heading">Walk-in: a new person</h2>
                <form method="post" action="/walkin" class="walkin">\(csrf)
                \(field("walkin-first_name", "First name", value: model.walkIn["first_name"] ?? "", extra: "required maxlength=\"100\""))
                \(field("walkin-last_name", "Last name", value: model.walkIn["last_name"] ?? "", extra: "required maxlength=\"100\""))
                \(field("walkin-date_of_birth", "Date of birth", value: model.walkIn["date_of_birth"] ?? "", type: "date", extra: "required"))
                <div class="field"><label for="walkin-gender">Gender (optional)</label><select id="walkin-gender" name="gender">\(option("", "Not given"))\(option("female", "Female"))\(option("male", "Male"))\(option("unknown", "Unknown"))</select></div>
                \(field("walkin-bed", "Bed (optional)", value: model.walkIn["bed"] ?? "", extra: "maxlength=\"50\""))
                \(field("walkin-notes", "Notes (optional)", value: model.walkIn["notes"] ?? "", extra: "maxlength=\"2000\""))
                <button type="submit">Enter and check in</button>
                </form>
                </section>
                <section aria-labelledby="today-heading">
                <h2 id="today-heading">Today at this desk</h2>
                <div aria-live="polite">\(today)</div>
                </section>
                </main>
                """)
    }

    static let css = """
        *{box-sizing:border-box}
        html{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:18px;line-height:1.4;color:#1a1a1a;background:#f6f6f3}
        body{margin:0;padding:0 1rem 2rem;max-width:1100px;margin-inline:auto;overflow-wrap:anywhere}
        h1{font-size:1.5rem;margin:.8rem 0}h1 span{font-size:1rem;font-weight:normal;color:#444}
        h2{font-size:1.25rem;margin:1.2rem 0 .5rem}
        header{border-bottom:2px solid #ccc;padding-bottom:.5rem}
        main.narrow{max-width:26rem;margin:2rem auto}
        section{background:#fff;border:1px solid #ddd;border-radius:8px;padding:.5rem 1rem 1rem;margin-top:1rem}
        label{display:block;font-weight:600;margin:.5rem 0 .2rem}
        input,select,button{font:inherit;min-height:44px;width:100%;max-width:100%;padding:.4rem .6rem;border:2px solid #666;border-radius:6px;background:#fff;color:inherit}
        button{width:auto;min-width:44px;margin-top:.8rem;background:#0b5394;color:#fff;border-color:#0b5394;cursor:pointer;padding:.5rem 1.2rem}
        button.danger{background:#a61c00;border-color:#a61c00}
        :focus-visible{outline:4px solid #f1c232;outline-offset:2px}
        .signout{display:flex;flex-wrap:wrap;gap:.6rem;align-items:center}.signout button{margin-top:0}
        .banner{background:#fce8b2;border:2px solid #b45f06;padding:.6rem;border-radius:6px;font-weight:600}
        .roster{color:#444;margin:.3rem 0}
        .search,.walkin{display:grid;grid-template-columns:repeat(auto-fit,minmax(14rem,1fr));gap:0 1rem;align-items:end}
        ul.results,ol.today{list-style:none;padding:0;margin:0}
        ul.results li,ol.today li{border-top:1px solid #ddd;padding:.6rem 0}
        .result{display:grid;grid-template-columns:repeat(auto-fit,minmax(12rem,1fr));gap:0 1rem;align-items:end}
        .result .who{grid-column:1/-1;margin:.2rem 0}
        .who span{color:#444}
        .tag{background:#d9ead3;border-radius:4px;padding:0 .3rem}
        .state{font-weight:600;margin:.2rem 0}.state.done,.state.voided{color:#274e13}.state.problem{color:#a61c00}
        summary{min-height:44px;display:flex;align-items:center;cursor:pointer}
        .note{color:#444}
        #status:empty{display:none}#status{padding:.5rem;border-left:6px solid #0b5394;background:#fff}
        @media (max-width:700px){html{font-size:17px}.search,.walkin,.result{grid-template-columns:1fr}button{width:100%}}
        """

    static let script = """
        "use strict";
        (function () {
          var today = document.getElementById("today");
          var banner = document.getElementById("banner");
          var roster = document.getElementById("roster");
          if (!banner || typeof EventSource === "undefined") { return; }
          var source = new EventSource("/events");
          source.addEventListener("signedout", function () { window.location.assign("/signin?out=1"); });
          source.onmessage = function (message) {
            var data;
            try { data = JSON.parse(message.data); } catch (e) { return; }
            banner.textContent = data.banner;
            banner.hidden = !data.banner;
            roster.textContent = data.roster;
            var known = 0;
            Object.keys(data.rows).forEach(function (id) {
              var element = document.querySelector('[data-journey="' + id + '"]');
              if (!element) { return; }
              known += 1;
              var state = data.rows[id];
              if (element.textContent !== state.text) {
                element.textContent = state.text;
                element.className = "state " + state.kind;
              }
            });
            // A check-in made elsewhere on this desk (another tab): reload to show it, unless
            // staff are typing.
            var rows = today ? today.querySelectorAll("[data-journey]").length : 0;
            var typing = document.activeElement && /INPUT|SELECT|TEXTAREA/.test(document.activeElement.tagName);
            if (data.order.length > rows && !typing) { window.location.reload(); }
          };
        })();
        """
}
