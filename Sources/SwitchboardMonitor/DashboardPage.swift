// The dashboard's one page: plain HTML and a little script, no outside resources (it must work
// on a shelter network with no Internet). It renders each snapshot the stream sends; every value
// goes in as text (textContent), never as markup. The page carries the dashboard's CSRF token
// (see DashboardServer): its script sends it back on every request that changes something.

import Foundation

enum DashboardPage {
    /// The page, with `csrf` (hexadecimal: nothing to escape) in its head.
    static func html(csrf: String) -> String { template.replacingOccurrences(of: "{{csrf}}", with: csrf) }

    static let template = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="csrf-token" content="{{csrf}}">
        <title>Switchboard</title>
        <style>
          body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1c2430; background: #f6f7f9; }
          h1 { font-size: 1.3em; margin: 0 0 .2em; } h2 { font-size: 1.05em; margin: 1.4em 0 .4em; }
          .status { color: #5a6472; } .error { color: #a8071a; font-weight: 600; }
          section { overflow-x: auto; }
          table { border-collapse: collapse; background: #fff; width: 100%; }
          th, td { border: 1px solid #d9dde3; padding: .25em .6em; text-align: left; }
          th { background: #eceff3; font-weight: 600; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
          .grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(36em, 1fr)); gap: 0 2em; }
          button { font: inherit; }
          svg.chart { background: #fff; border: 1px solid #d9dde3; width: 100%; height: auto; display: block; }
          svg.chart path { fill: none; stroke: #2f6fb2; stroke-width: 1.5; vector-effect: non-scaling-stroke; }
          .chart-label { color: #5a6472; font-size: .9em; margin: .5em 0 .2em; }
        </style>
        </head>
        <body>
        <h1>Switchboard</h1>
        <div class="status">Journal head <b id="head">–</b> · updated <span id="updated">never</span>
          <span id="connection"></span> <span id="broker-error" class="error"></span></div>
        <div class="grid">
          <section><h2>Events by type (per second, last 10 s)</h2><table id="rates"></table></section>
          <section><h2>The last hour</h2><div id="charts"></div></section>
          <section><h2>Consumer groups</h2><table id="groups"></table></section>
          <section><h2>Dead letters</h2><div id="dead-letter-summary" class="status"></div><table id="dead-letters"></table><div id="replay-result" class="status"></div></section>
          <section><h2>Services</h2><table id="services"></table></section>
          <section><h2>Kiosks and other producers</h2><table id="kiosks"></table></section>
          <section><h2>Recent problems</h2><table id="problems"></table></section>
        </div>
        <script>
        "use strict";
        const csrf = document.querySelector('meta[name="csrf-token"]').content;
        function fill(id, headers, rows, empty, numeric) {
          const table = document.getElementById(id);
          table.replaceChildren();
          const head = table.insertRow();
          for (const h of headers) { const th = document.createElement("th"); th.textContent = h; head.appendChild(th); }
          if (rows.length === 0) {
            const cell = table.insertRow().insertCell(); cell.colSpan = headers.length; cell.textContent = empty; return;
          }
          for (const row of rows) {
            const tr = table.insertRow();
            row.forEach((value, index) => {
              const td = tr.insertCell();
              if (value instanceof Node) { td.appendChild(value); } else { td.textContent = value === undefined ? "–" : String(value); }
              if (numeric.includes(index)) td.className = "n";
            });
          }
        }
        function replayButton(letter) {
          const button = document.createElement("button");
          button.textContent = "replay";
          button.onclick = async () => {
            // JSON and the CSRF header: the shape no other page can send (see DashboardServer).
            const response = await fetch("/api/dlq/replay", {
              method: "POST",
              headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
              body: JSON.stringify({ group: letter.group, bus_seq: letter.bus_seq })
            });
            document.getElementById("replay-result").textContent = (await response.text()).trim();
          };
          return button;
        }
        // One chart: an inline SVG (no outside resources) whose path the dashboard computed
        // (DashboardHistory: numbers only, set as an attribute, never as markup).
        function chart(label, drawn, width, height) {
          const box = document.createElement("div");
          const caption = document.createElement("div");
          caption.className = "chart-label";
          caption.textContent = label + " — now " + drawn.now + ", scale 0–" + drawn.max;
          const svgNS = "http://www.w3.org/2000/svg";
          const svg = document.createElementNS(svgNS, "svg");
          svg.setAttribute("class", "chart");
          svg.setAttribute("viewBox", "0 0 " + width + " " + height);
          svg.setAttribute("preserveAspectRatio", "none");
          const path = document.createElementNS(svgNS, "path");
          path.setAttribute("d", drawn.path);
          svg.appendChild(path);
          box.append(caption, svg);
          return box;
        }
        function render(s) {
          document.getElementById("head").textContent = s.head;
          document.getElementById("updated").textContent = s.updated || "never";
          const c = s.charts;
          document.getElementById("charts").replaceChildren(
            chart("events per second (every 10 s)", c.rate, c.width, c.height),
            ...c.lag.map(l => chart("lag of group " + l.group, l, c.width, c.height)));
          document.getElementById("broker-error").textContent = s.broker_error ? "broker: " + s.broker_error : "";
          fill("rates", ["type", "per second", "total"], s.rates.map(r => [r.type, r.per_second.toFixed(1), r.total]), "No events yet.", [1, 2]);
          fill("groups", ["group", "cursor", "lag", "pending", "members", "redelivered", "dead letters"],
            s.groups.map(g => [g.name, g.cursor, g.lag, g.pending, g.members, g.redeliveries, g.dead]), "No consumer groups.", [1, 2, 3, 4, 5, 6]);
          const codes = Object.entries(s.dead_letters_by_code).sort((a, b) => b[1] - a[1]).map(([c, n]) => c + " " + n).join(", ");
          document.getElementById("dead-letter-summary").textContent = s.dead_letter_total === 0 ? "" :
            s.dead_letter_total + " waiting (" + codes + ")" +
            (s.dead_letter_total > s.dead_letters.length ? "; the newest " + s.dead_letters.length + " below, every one with switchboard dlq list --all" : "");
          fill("dead-letters", ["group", "bus_seq", "type", "attempts", "code", "since", ""],
            s.dead_letters.map(d => [d.group, d.bus_seq, d.type, d.attempts, d.code, d.at_ago, replayButton(d)]), "No dead letters.", [1, 3]);
          fill("services", ["service", "workers", "busy", "queued"], s.services.map(v => [v.name, v.workers, v.busy, v.queued]),
            "No services.", [1, 2, 3]);
          fill("kiosks", ["producer", "last check-in", "last event journaled", "last seen", "outbox", "last delivery"],
            s.kiosks.map(k => [k.name, k.last_checkin_ago, k.last_event_ago, k.last_seen_ago, k.outbox, k.last_ack_ago]), "None heard from yet.", [4]);
          fill("problems", ["when", "what", ""], s.problems.map(p => [p.at_ago, p.kind, p.text]), "None.", []);
        }
        const stream = new EventSource("/api/stream");
        stream.onmessage = event => {
          document.getElementById("connection").textContent = "";
          window.lastMessage = event.data;  // what the stream carried last (read by the tests)
          render(JSON.parse(event.data));
        };
        stream.onerror = () => { document.getElementById("connection").textContent = "· reconnecting…"; };
        </script>
        </body>
        </html>
        """
}
