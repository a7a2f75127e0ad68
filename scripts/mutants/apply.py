#!/usr/bin/env python3
"""The mutations of scripts/mutants.sh: parse scripts/mutants/mutations.txt, list them, check
that each still applies, or apply one.

Usage: apply.py LIST_FILE list               -> "name<TAB>tests<TAB>files" per mutation
       apply.py LIST_FILE check              -> every edit of every mutation matches exactly
                                               as often as it says (nothing is written)
       apply.py LIST_FILE apply NAME         -> apply NAME's edits to the working tree

An edit is a literal text replacement (no regular expressions), whose FROM text must occur
exactly `count` times (default 1) in its file: if a refactor moved or changed the code, the
edit does not apply and this exits with status 2, so the campaign never silently tests the
unmutated code. Paths are relative to the repository root (the current directory).

The list's format:
    # a comment
    [name]                    a mutation; its name is unique
    why = one line            what bug it plays
    tests = pg:FILTER ... it:BINARY[:FILTER] ...
                              the tests expected to catch it (see scripts/mutants.sh)
    file = src/entry/claim.rs the file of the edits that follow (sticky)
    count = 2                 how often the next edit's FROM occurs (default 1)
    - a line of FROM          FROM: consecutive "- " lines, joined by newlines, verbatim
    + a line of TO            TO: the "+ " lines that follow ("+" alone: an empty line);
                              no "+" line at all: FROM is deleted
"""

import sys


def parse(path):
    mutations, current, edit = [], None, None

    def close_edit():
        nonlocal edit
        if edit is not None:
            current["edits"].append(edit)
            edit = None

    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            where = f"{path}:{number}"
            if line.startswith("- ") or line == "-":
                if current is None or "file" not in current:
                    sys.exit(f"{where}: an edit needs a [name] and a file = line first")
                if edit is not None and edit["to"] is not None:
                    close_edit()
                if edit is None:
                    edit = {"file": current["file"], "count": current.pop("count", 1),
                            "from": [], "to": None, "line": number}
                edit["from"].append(line[2:])
                continue
            if line.startswith("+ ") or line == "+":
                if edit is None:
                    sys.exit(f"{where}: a + line must follow - lines")
                edit["to"] = (edit["to"] or []) + [line[2:]]
                continue
            close_edit()
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            if stripped.startswith("[") and stripped.endswith("]"):
                current = {"name": stripped[1:-1], "edits": [], "why": "", "tests": ""}
                if any(m["name"] == current["name"] for m in mutations):
                    sys.exit(f"{where}: duplicate mutation {current['name']}")
                mutations.append(current)
                continue
            key, sep, value = stripped.partition("=")
            if not sep or current is None:
                sys.exit(f"{where}: expected 'key = value' inside a [mutation]: {line!r}")
            key, value = key.strip(), value.strip()
            if key == "count":
                current["count"] = int(value)
            elif key in ("file", "why", "tests"):
                current[key] = value
            else:
                sys.exit(f"{where}: unknown key {key!r}")
        close_edit()
    for m in mutations:
        if not m["edits"]:
            sys.exit(f"{path}: mutation {m['name']} has no edit")
        if not m["tests"]:
            sys.exit(f"{path}: mutation {m['name']} names no tests")
    return mutations


def edited(mutation, read):
    """{file: new text} for the mutation's edits, or exit 2 if one does not apply exactly."""
    texts = {}
    for e in mutation["edits"]:
        text = texts.get(e["file"])
        if text is None:
            text = read(e["file"])
        old = "\n".join(e["from"])
        new = "\n".join(e["to"] or [])
        found = text.count(old)
        if found != e["count"]:
            sys.stderr.write(
                f"mutation {mutation['name']}: the edit of list line {e['line']} expects its text "
                f"{e['count']} time(s) in {e['file']}, found {found}:\n{old}\n")
            sys.exit(2)
        texts[e["file"]] = text.replace(old, new)
    return texts


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    mutations = parse(sys.argv[1])
    command = sys.argv[2]
    if command == "list":
        for m in mutations:
            files = " ".join(sorted({e["file"] for e in m["edits"]}))
            print(f"{m['name']}\t{m['tests']}\t{files}")
    elif command == "check":
        for m in mutations:
            edited(m, read)
        print(f"all {len(mutations)} mutations apply exactly")
    elif command == "apply" and len(sys.argv) == 4:
        wanted = [m for m in mutations if m["name"] == sys.argv[3]]
        if not wanted:
            sys.exit(f"no mutation {sys.argv[3]}")
        for path, text in edited(wanted[0], read).items():
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
