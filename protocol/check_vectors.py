#!/usr/bin/env python3
"""Checks that protocol/schemas agree with protocol/vectors.

Every valid content vector must pass its JSON Schema; every invalid one marked "rule": "schema"
must fail it ("semantic" ones break rules beyond JSON Schema, which receivers check in code).
Every event header in a vector expected to be ACKed must pass event.header.v1.json. Service
plane REQUEST/REPLY header vectors must pass or fail their schemas as they say; so must the
consumer-group header vectors (against commands.v1.json's $defs) and content vectors. Auth
vectors must pass or fail theirs, and every fingerprint must be its token's SHA-256 prefix.
Needs the `jsonschema` package (pip install jsonschema).
"""
import datetime
import hashlib
import json
import pathlib
import re
import sys

import jsonschema

root = pathlib.Path(__file__).resolve().parent
schemas = {p.name: json.loads(p.read_text()) for p in (root / "schemas").glob("*.json")}
for name, schema in schemas.items():
    jsonschema.Draft202012Validator.check_schema(schema)

failures = []
checkin = jsonschema.Draft202012Validator(schemas["checkin.recorded.v1.json"])
count = 0
for path in sorted((root / "vectors" / "checkin.recorded").glob("*.json")):
    vector = json.loads(path.read_text())
    errors = list(checkin.iter_errors(vector["content"]))
    expect = vector["expect"]
    count += 1
    if expect["valid"] and errors:
        failures.append(f"{path.name}: valid vector fails the schema: {errors[0].message}")
    if not expect["valid"] and expect["rule"] == "schema" and not errors:
        failures.append(f"{path.name}: invalid vector passes the schema")

voided = jsonschema.Draft202012Validator(schemas["checkin.voided.v1.json"])
for path in sorted((root / "vectors" / "checkin.voided").glob("*.json")):
    vector = json.loads(path.read_text())
    errors = list(voided.iter_errors(vector["content"]))
    expect = vector["expect"]
    count += 1
    if expect["valid"] and errors:
        failures.append(f"{path.name}: valid vector fails the schema: {errors[0].message}")
    if not expect["valid"] and expect["rule"] == "schema" and not errors:
        failures.append(f"{path.name}: invalid vector passes the schema")

header = jsonschema.Draft202012Validator(schemas["event.header.v1.json"])
for path in sorted((root / "vectors" / "envelope").glob("valid-*.json")):
    vector = json.loads(path.read_text())
    frames = vector["frames"]
    if frames[1].get("text") != "EVENT":
        continue
    count += 1
    errors = list(header.iter_errors(json.loads(frames[2]["text"])))
    if errors:
        failures.append(f"{path.name}: header fails event.header.v1.json: {errors[0].message}")

# Service plane: REQUEST/REPLY headers against their schemas (protocol/README.md, 12.3).
service = {
    "request": jsonschema.Draft202012Validator(schemas["request.header.v1.json"]),
    "reply": jsonschema.Draft202012Validator(schemas["reply.header.v1.json"]),
}
for path in sorted((root / "vectors" / "service").glob("*.json")):
    vector = json.loads(path.read_text())
    errors = list(service[vector["kind"]].iter_errors(vector["header"]))
    count += 1
    if vector["expect"]["valid"] and errors:
        failures.append(f"{path.name}: valid header fails its schema: {errors[0].message}")
    if not vector["expect"]["valid"] and not errors:
        failures.append(f"{path.name}: invalid header passes its schema")

# Auth service: token.get replies and auth.* event contents (protocol/README.md, section 14).
# A fingerprint is the first 8 hexadecimal digits of its token's SHA-256 (14.1): every vector
# holding both shows exactly that, except the one marked "semantic" that breaks this rule (and
# an invalid one may show more digits, for a schema rule about the length).
for path in sorted((root / "vectors" / "auth").glob("*.json")):
    vector = json.loads(path.read_text())
    content, expect = vector["content"], vector["expect"]
    errors = list(jsonschema.Draft202012Validator(schemas[vector["schema"]]).iter_errors(content))
    count += 1
    if expect["valid"] and errors:
        failures.append(f"{path.name}: valid content fails {vector['schema']}: {errors[0].message}")
    if not expect["valid"] and expect.get("rule") != "semantic" and not errors:
        failures.append(f"{path.name}: invalid content passes {vector['schema']}")
    if not expect["valid"] and expect.get("rule") not in ("schema", "semantic"):
        failures.append(f"{path.name}: an invalid vector says which rule it breaks (schema or semantic)")
    if isinstance(content.get("token"), str) and isinstance(content.get("fingerprint"), str):
        digest = hashlib.sha256(content["token"].encode("utf-8")).hexdigest()
        matches = content["fingerprint"] == digest[:8] if expect["valid"] else digest.startswith(content["fingerprint"])
        if expect.get("rule") == "semantic":
            if matches:
                failures.append(f"{path.name}: a semantic vector passes the schema, so it must break the fingerprint rule")
        elif not matches:
            failures.append(
                f"{path.name}: fingerprint {content['fingerprint']} is not its token's SHA-256 prefix {digest[:8]}")

# Consumer groups (section 15): each header vector against its command's $defs schema in
# commands.v1.json (an invalid one must fail, and an error must name its field), and the
# content vectors of dlq.<group> and groups.changed events against their schemas.
group_defs = {"JOIN": "join", "JOINED": "joined", "DELIVER": "deliver", "ACK": "settle", "PROGRESS": "settle",
              "NACK": "settle-nack", "TERM": "settle-term", "LEAVE": "leave", "HEARTBEAT": "heartbeat",
              "ACKS": "group-acks"}
commands = schemas["commands.v1.json"]


def names_field(error, field):
    """Whether a schema error (or one of its sub-errors) is about `field`."""
    if field in error.absolute_path or (error.validator in ("required", "additionalProperties", "dependentRequired") and repr(field) in error.message):
        return True
    return any(names_field(sub, field) for sub in error.context or [])


# HEARTBEAT headers (section 6) are checked the same way, from vectors/heartbeat.
for path in sorted((root / "vectors" / "groups").glob("*.json")) + sorted((root / "vectors" / "heartbeat").glob("*.json")):
    vector = json.loads(path.read_text())
    expect = vector["expect"]
    count += 1
    if "command" in vector:
        if vector["command"] not in group_defs:
            failures.append(f"{path.name}: unknown command {vector['command']!r}")
            continue
        schema = dict(commands, **{"$ref": f"#/$defs/{group_defs[vector['command']]}"})
        errors = list(jsonschema.Draft202012Validator(schema).iter_errors(vector["header"]))
        if expect["valid"] and errors:
            failures.append(f"{path.name}: valid header fails its schema: {errors[0].message}")
        if not expect["valid"]:
            if not errors:
                failures.append(f"{path.name}: invalid header passes its schema")
            elif not expect.get("field"):
                failures.append(f"{path.name}: an invalid header vector names its field")
            elif not any(names_field(error, expect["field"]) for error in errors):
                failures.append(f"{path.name}: no schema error is about '{expect['field']}': {errors[0].message}")
    else:
        errors = list(jsonschema.Draft202012Validator(schemas[vector["schema"]]).iter_errors(vector["content"]))
        if expect["valid"] and errors:
            failures.append(f"{path.name}: valid content fails {vector['schema']}: {errors[0].message}")
        if not expect["valid"] and not errors:
            failures.append(f"{path.name}: invalid content passes {vector['schema']}")

# ACKS (section 6, protocol 1.1): header and content vectors against $defs acks and acks-content.
for path in sorted((root / "vectors" / "acks").glob("*.json")):
    vector = json.loads(path.read_text())
    expect = vector["expect"]
    count += 1
    errors = []
    for part, definition in (("header", "acks"), ("content", "acks-content")):
        schema = dict(commands, **{"$ref": f"#/$defs/{definition}"})
        errors += list(jsonschema.Draft202012Validator(schema).iter_errors(vector[part]))
    if expect["valid"] and errors:
        failures.append(f"{path.name}: valid ACKS fails its schema: {errors[0].message}")
    if not expect["valid"]:
        if not errors:
            failures.append(f"{path.name}: invalid ACKS passes its schema")
        elif not any(names_field(error, expect["field"]) for error in errors):
            failures.append(f"{path.name}: no schema error is about '{expect['field']}': {errors[0].message}")

# Date-times (section 6): accepted ones match the header schema's pattern, are real calendar
# instants, and carry the instant Python computes; refused ones fail the pattern or the calendar.
time_pattern = re.compile(schemas["event.header.v1.json"]["properties"]["time"]["pattern"])


def instant(text):
    """Milliseconds since the epoch, fraction truncated to 3 digits; None if not a real date-time."""
    if not time_pattern.fullmatch(text):
        return None
    match = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(?:\.(\d+))?([Zz]|([+-])(\d\d):(\d\d))", text)
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    offset = 0
    if match.group(9):
        if int(match.group(10)) > 23 or int(match.group(11)) > 59:
            return None
        offset = (-1 if match.group(9) == "-" else 1) * (int(match.group(10)) * 60 + int(match.group(11)))
    try:
        moment = datetime.datetime(year, month, day, hour, minute, min(second, 59), tzinfo=datetime.timezone.utc)
    except ValueError:
        return None
    if second > 60:
        return None
    millis = int(((match.group(7) or "") + "000")[:3])
    return int(moment.timestamp()) * 1000 - offset * 60_000 + millis


for name, accepted in (("accepted.json", True), ("refused.json", False)):
    for case in json.loads((root / "vectors" / "timestamp" / name).read_text())["cases"]:
        count += 1
        got = instant(case["text"])
        if accepted and got != case["unix_ms"]:
            failures.append(f"timestamp/{name}: {case['text']!r} gives {got}, the vector says {case['unix_ms']}")
        if not accepted and got is not None:
            failures.append(f"timestamp/{name}: {case['text']!r} is a valid date-time")

# Workers (section 16): filemaker.record.written and filemaker.record.voided contents and the eto service's bodies, each
# against its schema, or one $defs entry of it ("def"); an invalid one must name its field.
for path in sorted((root / "vectors" / "workers").glob("*.json")):
    vector = json.loads(path.read_text())
    schema = schemas[vector["schema"]]
    if "def" in vector:
        schema = {"$ref": "#/$defs/" + vector["def"], "$defs": schema["$defs"]}
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(vector["content"]))
    count += 1
    if vector["expect"]["valid"] and errors:
        failures.append(f"workers/{path.name}: valid content fails: {errors[0].message}")
    if not vector["expect"]["valid"]:
        field = vector["expect"].get("field")
        if not errors:
            failures.append(f"workers/{path.name}: invalid content passes its schema")
        elif field and not any(names_field(e, field) or any(names_field(c, field) for c in (e.context or [])) for e in errors):
            failures.append(f"workers/{path.name}: the errors do not name {field!r}: {[e.message for e in errors]}")

# Majordomo vectors: well-formed files with a known reaction.
for path in sorted((root / "vectors" / "majordomo").glob("*.json")):
    vector = json.loads(path.read_text())
    count += 1
    reaction = vector["expect"]["reaction"]
    if reaction not in ("dropped", "disconnect", "reply"):
        failures.append(f"{path.name}: unknown reaction {reaction!r}")
    if reaction != "dropped" and not vector["expect"].get("frames"):
        failures.append(f"{path.name}: a {reaction} vector lists the frames that come back")
    if vector.get("setup") not in (None, "ready", "other-worker"):
        failures.append(f"{path.name}: unknown setup {vector.get('setup')!r}")

for line in failures:
    print("FAIL", line)
print(f"protocol vectors: {count - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
