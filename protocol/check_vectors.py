#!/usr/bin/env python3
"""Checks that protocol/schemas agree with protocol/vectors.

Every valid content vector must pass its JSON Schema; every invalid one marked "rule": "schema"
must fail it ("semantic" ones break rules beyond JSON Schema, which receivers check in code).
Every event header in a vector expected to be ACKed must pass event.header.v1.json.
Needs the `jsonschema` package (pip install jsonschema).
"""
import json
import pathlib
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

for line in failures:
    print("FAIL", line)
print(f"protocol vectors: {count - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
