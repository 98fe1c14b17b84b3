#!/usr/bin/env python3
"""Groups the samples of a `perf record --call-graph dwarf` of tern by what they do.

    perf script -i perf.data -F comm,tid,ip,sym | python bench/kafka_compare/perf_group.py

Prints (1) the leaf functions, (2) the innermost tern step of each sample (the first frame, from
the leaf up, that matches STEPS), (3) step x leaf for the largest steps.  Percentages are of all
samples.
"""

import collections
import re
import sys

# (label, regex on a frame's symbol), tried from the leaf upwards; the first frame matching any
# of them names the sample's step.
STEPS = [
    ("LogSegment::read (pread of the batches)", r"LogSegment::read_uninit|LogSegment::read\b"),
    ("LogSegment::read_header_at (61-byte header preads)", r"read_header_at|translate_offset"),
    ("encode_response (copy of records into the response buffer)", r"encode_response|Encodable>::encode|encode_request_header"),
    ("write_frame / socket send", r"write_frame|poll_write|BufWriter"),
    ("read_frame / socket receive", r"read_frame|poll_read"),
    ("decode_request", r"decode_request"),
    ("fetch handler (other)", r"handlers::fetch::"),
    ("other handlers", r"tern_broker::handlers::"),
    ("drop/free of buffers", r"drop_in_place|__rust_dealloc|cfree|free\b"),
    ("tokio scheduler / epoll (idle, wakeups)", r"tokio::runtime::(scheduler|io|time)|epoll_wait"),
]

LEAF_GROUPS = [
    ("kernel: copy to user (_copy_to_iter)", r"^_copy_to_iter$|copy_user"),
    ("kernel: copy from user into skb (_copy_from_iter)", r"^_copy_from_iter$|copy_from_iter"),
    ("user memcpy (memmove)", r"memmove|memcpy"),
    ("kernel: page cache lookup (filemap_*, folio_*)", r"filemap|folio|workingset|xas_|find_get"),
    ("kernel: TCP/skb", r"tcp_|skb|__alloc_skb|sk_|ip_|__dev|loopback|net_rx|napi"),
    ("kernel: scheduler/locks/irq", r"raw_spin|schedule|finish_task|__wake|try_to_wake|futex|irq"),
    ("kernel: epoll", r"epoll|ep_|fdget"),
    ("kernel: page faults / zeroing", r"clear_page|page_fault|do_anonymous|handle_mm|memset"),
    ("malloc/free", r"malloc|free|_int_|mmap|munmap"),
]


def classify(name, table):
    for label, rx in table:
        if re.search(rx, name):
            return label
    return None


def main():
    samples = []
    cur = None
    for line in sys.stdin:
        if not line.strip():
            if cur is not None:
                samples.append(cur)
            cur = None
            continue
        if not line.startswith((" ", "\t")):
            cur = []
            continue
        parts = line.strip().split(None, 1)
        if cur is not None:
            cur.append(parts[1] if len(parts) > 1 else "?")
    if cur:
        samples.append(cur)
    n = len(samples)
    print(f"{n} samples")
    leaf = collections.Counter()
    leafg = collections.Counter()
    step = collections.Counter()
    cross = collections.Counter()
    for s in samples:
        lf = re.sub(r" \(inlined\)$", "", s[0]) if s else "?"
        leaf[lf] += 1
        lg = classify(lf, LEAF_GROUPS) or "other"
        leafg[lg] += 1
        st = next((c for f in s for c in [classify(f, STEPS)] if c), "other")
        step[st] += 1
        cross[(st, lg)] += 1

    def show(title, counter, k=15):
        print(f"\n{title}")
        for key, c in counter.most_common(k):
            print(f"{100 * c / n:5.1f}%  {key}")

    show("leaf functions", leaf, 20)
    show("leaf groups", leafg)
    show("innermost tern step", step)
    print("\nstep x leaf group")
    for (st, lg), c in cross.most_common(25):
        print(f"{100 * c / n:5.1f}%  {st}  |  {lg}")


if __name__ == "__main__":
    main()
