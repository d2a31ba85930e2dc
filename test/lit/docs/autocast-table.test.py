"""Compares the AUTOCAST rows of autocast.def with the table in docs/qir.md."""
import re
import sys

table_def, ops_def, doc = (open(p).read() for p in sys.argv[1:4])
spelling = dict(re.findall(r'QIR_OP\((\w+),\s*"([a-z_0-9]+)"', ops_def))
rows = ["| `%s` | %s | %s |" % (spelling[c], r, w)
        for c, r, w in re.findall(r'^AUTOCAST\((\w+),\s*(\w+),\s*"([^"]*)"\)', table_def, re.M)]
section = doc.split("## Mixed precision", 1)[1].split("\n## ", 1)[0]
documented = [l for l in section.splitlines() if l.startswith("| `")]
if rows != documented:
    for want, got in zip(rows + [""] * len(documented), documented + [""] * len(rows)):
        if want != got:
            print("autocast table: autocast.def says %r, docs/qir.md %r" % (want, got))
            break
    sys.exit(1)
print("autocast table: %d rows, docs agree" % len(rows))
