#!/usr/bin/env python3
"""Splices the mirror APIs of a generated messages.rs (kafka-protocol's generator run on
protocol/schemas/mirror only) into the vendored crate's messages.rs, after the last Kafka API
(DeleteShareGroupOffsets, key 92) of every list: module declarations, `impl Request`, ApiKey,
header versions, valid versions, TryFrom, RequestKind and ResponseKind with their arms and
From impls. Usage: splice.py <generated messages.rs> <vendored messages.rs> (edited in place).
Run it on a vendored file without the mirror APIs (`git show 7fa0e43:...`) or it adds them twice."""
import re
import sys

APIS = ["CreateClusterMirror", "StartMirrorTopics", "StopMirrorTopics", "LastMirroredOffsets",
        "ListClusterMirrors", "DescribeClusterMirrors", "ReadMirrorStates", "WriteMirrorStates",
        "PauseMirrorTopics", "ResumeMirrorTopics", "DeleteClusterMirror", "BumpLeaderEpochs"]
LAST = "DeleteShareGroupOffsets"


def snake(name):
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


PATTERN = re.compile("|".join(a + "|" + snake(a) for a in APIS))


def api_of(line):
    m = PATTERN.search(line)
    if not m:
        return None
    word = m.group(0)
    return next(i for i, a in enumerate(APIS) if word in (a, snake(a)))


def indent(line):
    return len(line) - len(line.lstrip())


def entry_start(lines, i):
    """Moves up over the attributes and doc comments that belong to the entry at line i."""
    while i > 0 and lines[i - 1].lstrip().startswith(("#[", "///")):
        i -= 1
    return i


def entry_end(lines, start, last):
    """The line after the entry whose last named line is `last` and which starts at `start`."""
    base = indent(lines[start])
    i = last + 1
    while i < len(lines):
        s = lines[i].strip()
        if s and (indent(lines[i]) > base or (indent(lines[i]) == base and s[0] in "})]")):
            i += 1
        else:
            break
    return i


def regions(lines):
    """(first, last) named lines of each run of entries that goes through the APIs in order."""
    out, prev = [], None
    for i, line in enumerate(lines):
        k = api_of(line)
        if k is None:
            continue
        if prev is None or k < prev[0]:
            out.append([i, i])
        out[-1][1] = i
        prev = (k, i)
    return out


def main():
    gen = open(sys.argv[1]).read().split("\n")
    vendored = open(sys.argv[2]).read().split("\n")
    inserts, cursor = [], 0
    for first, last in regions(gen):
        start = entry_start(gen, first)
        block = gen[start:entry_end(gen, first if gen[first].strip().startswith("impl") else start, last)]
        m = PATTERN.search(gen[first])
        prefix = gen[first][:m.start()].lstrip()
        word = m.group(0)
        target = prefix + (LAST if word[0].isupper() else snake(LAST))
        j = next(j for j in range(cursor, len(vendored)) if target in vendored[j].lstrip()
                 and vendored[j].lstrip().startswith(prefix))
        # The last line of the vendored entry for key 92 in this list.
        vstart = entry_start(vendored, j)
        k = j
        while k + 1 < len(vendored) and (LAST in vendored[k + 1] or snake(LAST) in vendored[k + 1]):
            k += 1
        end = entry_end(vendored, j if vendored[j].strip().startswith("impl") else vstart, k)
        # Entries separated by blank lines (modules, impls) get one before the first inserted.
        if gen[start - 1].strip() == "" and vendored[end - 1].strip() != "":
            block = [""] + block
        inserts.append((end, block))
        cursor = end
    for at, block in reversed(inserts):
        vendored[at:at] = block
    text = "\n".join(vendored).replace("(0..=92).filter_map", "(0..=105).filter_map")
    open(sys.argv[2], "w").write(text)
    print(f"spliced {len(inserts)} lists")


main()
