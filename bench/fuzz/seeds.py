#!/usr/bin/env python3
"""Writes the seed corpus of each fuzz target from protocol/vectors.

Usage: seeds.py OUT_DIR TARGET   (writes OUT_DIR/<name>, one file a seed; the files are
rebuilt on every run, so they follow the vectors.) The FileMaker emulator's find parser
(findparser) is no protocol input: its seeds are the find bodies written out below.

Multi-frame targets (envelope, majordomo) get the frames joined with 0xFF 0xFF, the framing
FuzzInput.frames undoes. Seeds larger than MAX_SEED are left out: the fuzzers run with a small
-max_len (run.sh), and the size checks they would reach have their own tests.
"""

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "protocol" / "vectors"
SEPARATOR = b"\xff\xff"
MAX_SEED = 64 * 1024
EMPTY = b"{}"
VERSION = b"SWB\x01\x00"


def frame(spec):
    if "text" in spec:
        return spec["text"].encode()
    if "hex" in spec:
        return bytes.fromhex(spec["hex"])
    if "repeat" in spec:
        return (spec.get("prefix", "") + spec["repeat"] * spec["count"] + spec.get("suffix", "")).encode()
    raise ValueError(f"unknown frame {spec}")


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def vectors(folder):
    for path in sorted((VECTORS / folder).glob("*.json")):
        yield path, json.loads(path.read_text())


def message(command, header, content=EMPTY):
    return [VERSION, command.encode(), header, EMPTY, EMPTY, content]


def envelope_messages():
    for _, vector in vectors("envelope"):
        yield [frame(f) for f in vector["frames"]]
    for folder in ("groups", "heartbeat"):
        for _, vector in vectors(folder):
            if "command" in vector:
                yield message(vector["command"], compact(vector["header"]))
    # Check-in contents inside an EVENT whose header is valid, so the content rules are reached.
    checkin = json.loads((VECTORS / "envelope" / "valid-checkin-by-name.json").read_text())
    frames = [frame(f) for f in checkin["frames"]]
    for _, vector in vectors("checkin.recorded"):
        yield frames[:5] + [compact(vector["content"])]


def service_bodies():
    for _, vector in vectors("service"):
        command = "REQUEST" if vector["kind"] == "request" else "REPLY"
        yield message(command, compact(vector["header"]), b'{"site_id":12}')


def majordomo_messages():
    for _, vector in vectors("majordomo"):
        yield [frame(f) for f in vector["frames"]]
    # REQUEST and REPLY bodies in the client and worker framings the broker reads.
    for body in service_bodies():
        yield [b"MDPC02", b"\x01", b"eto"] + body
        yield [b"", b"MDPC01", b"eto"] + body
        yield [b"MDPW02", b"\x04", b"client-1", b""] + body


def headers():
    """Every JSON header and content the vectors hold."""
    for _, vector in vectors("envelope"):
        frames = [frame(f) for f in vector["frames"]]
        yield from frames[2:6]
    for folder in ("service", "heartbeat", "groups", "checkin.recorded", "auth", "workers"):
        for _, vector in vectors(folder):
            for key in ("header", "content"):
                if key in vector:
                    yield compact(vector[key])


def group_headers():
    for _, vector in vectors("groups"):
        if "header" in vector:
            yield compact(vector["header"])


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)


def texts():
    """Timestamps, and every short string in the vectors (ids, types, names, dates)."""
    for path in sorted(VECTORS.rglob("*.json")):
        vector = json.loads(path.read_text())
        for text in strings({k: v for k, v in vector.items() if k not in ("description", "why")}):
            if len(text) <= 80:
                yield text.encode()


def csv_files():
    """One CSV file per check-in vector: the header row and the vector's row, as the kiosk writes them."""
    columns = ["first_name", "last_name", "date_of_birth", "eto_participant_id", "site_id", "program_id",
               "checked_in_at", "latitude", "longitude", "accuracy_m", "notes"]
    for _, vector in vectors("checkin.recorded"):
        content = vector["content"]
        person = content.get("participant", {})
        location = content.get("location") or {}
        values = {**{k: person.get(k) for k in ("first_name", "last_name", "date_of_birth")},
                  "eto_participant_id": person.get("eto_participant_id"),
                  **{k: content.get(k) for k in ("site_id", "program_id", "checked_in_at", "notes")},
                  "latitude": location.get("latitude"), "longitude": location.get("longitude"),
                  "accuracy_m": location.get("accuracy_m")}
        cell = lambda v: "" if v is None else '"' + str(v).replace('"', '""') + '"'
        yield (",".join(columns) + "\r\n" + ",".join(cell(values[c]) for c in columns) + "\r\n").encode()


def find_bodies():
    """`_find` bodies as the emulator's tests, its README and filemaker.md write them, and as
    our FileMaker client sends them (offset and limit as text), with the refusals they test."""
    bodies = [
        {"query": [{"Shelter": "Harbor"}]},
        {"query": [{"Shelter": "Harbor"}, {"Shelter": "Eastside"}]},
        {"query": [{"Shelter": "Harbor"}, {"CheckInID": "<9", "omit": "true"}]},
        {"query": [{"CheckInID": "3...5"}]},
        {"query": [{"CheckInID": ">10"}]},
        {"query": [{"CheckInID": ">=11"}, {"CheckInID": "<=1"}]},
        {"query": [{"Bed": "==Bed 1"}]},
        {"query": [{"Bed": "Bed 1"}]},
        {"query": [{"FirstName": "J*"}]},
        {"query": [{"FirstName": "M@rcus"}]},
        {"query": [{"Notes": "="}]},
        {"query": [{"Notes": "*"}]},
        {"query": [{"CheckedInAt": "11/03/2026...11/04/2026"}]},
        {"query": [{"CheckInID": "*"}], "sort": [{"fieldName": "CheckInID", "sortOrder": "descend"}], "offset": "2", "limit": 2},
        {"query": [{"Shelter": "Riverside", "omit": "true"}]},
        {"query": [{"FirstName": "Zebulon"}]},
        {"query": [{"FirstName": None}]},
        {"query": [{"Nope": "x"}]},
        {"query": []},
        {"query": [{"Shelter": "Harbor"}], "limit": "1"},
        {"query": [{"EventID": "==0190a1b2-0000-7000-8000-000000000000"}]},
        {"query": [{"ParticipantID": "1000"}], "portal": ["CheckIns"], "offset.CheckIns": "4", "limit.CheckIns": 10},
        {"query": [{"ParticipantID": "1000"}], "offset.CheckIns": "9"},
        {"query": [{"ParticipantID": "1000"}], "portal": []},
        {"query": [{"ParticipantID": "1000"}], "portal": "CheckIns"},
        {"query": [{"f": "v"}, {"f2": "v2", "omit": "true"}], "sort": [{"fieldName": "f", "sortOrder": "ascend"}],
         "offset": "1", "limit": "100"},
        {"query": [{"CheckIns::EventID": "==0190a1b2-0000-7000-8000-00000000000b", "DateOfBirth": "1/1/1960...12/31/1970"}],
         "sort": [{"fieldName": "LastName"}, {"fieldName": "CheckIns::FirstName", "sortOrder": "descend"}],
         "portal": ["Staff", "CheckIns"], "offset.Staff": 1, "limit.Staff": "5", "limit.CheckIns": 50},
        {"query": [{"CaseNumber": "RC-24*", "Shelter": "=Riverside"}, {"LastName": "Ortiz", "omit": "TRUE"}], "offset": 0},
        {"query": [{"CheckInID": 7, "Bed": 1.5, "Notes": True}], "limit": -1},
        {"query": [{"FirstName": ["Ana"]}, "Ana"], "sort": "FirstName"},
        {"query": [{"FirstName": "Ana"}], "sort": [{"fieldName": "FirstName", "sortOrder": "up"}], "portal": ["Nope"]},
    ]
    # Regressions (issue 15): a find that took time exponential in its stars (fuzz-findparser's
    # first timeout), and a date whose year overflowed FindCriterion.dateKey.
    bodies += [
        {"query": [{"CaseNumber": "RC-36*", "Shelter": "=Riversiide"}, {"LastName": "*******Ortilimde"},
                   {"LastName": "Ortilimit,z", "omit": "TRUE"}], "soffet": 0},
        {"query": [{"CheckedInAt": ">1/1/99999999999999999"}]},
    ]
    for body in bodies:
        yield compact(body)
    yield b""
    yield b"[]"
    yield b'{"query":[{"FirstName":"Ana"}],'


def multipart_bodies():
    """Content-Type line, newline, body: container uploads as clients send them, and near misses."""
    file_part = (b'--B\r\nContent-Disposition: form-data; name="upload"; filename="p.jpg"\r\n'
                 b'Content-Type: image/jpeg\r\n\r\n\xff\xd8\xff\xe0JFIF\r\n--B--\r\n')
    yield b"multipart/form-data; boundary=B\n" + file_part
    yield b'multipart/form-data; boundary="B"\n' + file_part
    yield (b"multipart/form-data; boundary=xyz\n--xyz\r\nContent-Disposition: form-data; name=a\r\n\r\none\r\n"
           b"--xyz\r\nContent-Disposition: form-data; name=b; filename=\"b.txt\"\r\n\r\ntwo\r\n--xyz--")
    yield b"multipart/form-data\n--B\r\n\r\n\r\n--B--"
    yield b"multipart/form-data; boundary=B\n--B\r\nno end of headers"
    yield b"multipart/form-data; boundary=\"\n--\r\n\r\n\r\n----"


TARGETS = {
    "envelope": lambda: (SEPARATOR.join(frames) for frames in envelope_messages()),
    "majordomo": lambda: (SEPARATOR.join(frames) for frames in majordomo_messages()),
    "headers": headers,
    "groups": group_headers,
    "json": headers,
    "timestamp": texts,
    "csv": csv_files,
    "findparser": find_bodies,
    "multipart": multipart_bodies,
}


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in TARGETS:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR {{{'|'.join(TARGETS)}}}")
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():
        old.unlink()
    written = set()
    for seed in TARGETS[sys.argv[2]]():
        if len(seed) > MAX_SEED:
            continue
        # Named by content, as libFuzzer names its own units: duplicates collapse.
        name = hashlib.sha1(seed).hexdigest()
        if name not in written:
            (out / name).write_bytes(seed)
            written.add(name)
    print(f"{len(written)} seeds in {out}")


if __name__ == "__main__":
    main()
